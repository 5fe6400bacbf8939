//! `stockd --role reconciler`: checks every SKU each `reconcile.interval_ms`,
//! repairs per `reconcile.repair`, alerts on findings (contract §8); and, in
//! the same pass, keeps the sales' clock: warms the SKUs whose sale opens
//! soon and tells openings and closings ([`SaleSchedule`], contract §19).
//!
//! Only the loop: the check is [`Reconciler`], built from the shared resources
//! like every role, and its one step, `run_once`, is what the tests and
//! `/v1/admin/reconcile` drive. Each pass is a span, each repair a child.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::ops::reconcile::Reconciler;
use crate::ops::sale_schedule::SaleSchedule;
use crate::otel::Tracing;

/// Runs one check, then one pass of the sale schedule, every `interval`
/// until `cancel` fires.
pub async fn run_until_stopped(
    reconciler: Arc<Reconciler>,
    schedule: SaleSchedule,
    interval: Duration,
    repair: bool,
    tracing: Tracing,
    cancel: CancellationToken,
) {
    while !cancel.is_cancelled() {
        let started = std::time::SystemTime::now();
        let checked = reconciler.run_once(&[], repair).await;
        let failed = checked.as_ref().err().map(|e| e.to_string());
        super::traces::reconcile_pass(
            &tracing,
            started,
            checked
                .as_ref()
                .map_err(|_| failed.as_deref().unwrap_or_default()),
        );
        match checked {
            Ok(report) if !report.healthy() => {
                tracing::warn!(
                    skus = report.skus.len(),
                    "reconcile.check: findings (see alerts)"
                );
            }
            Ok(_) => {}
            Err(err) => tracing::error!(error = %err, "reconcile.check: failed"),
        }
        // After the check, whatever it found: a SKU's warm-up judges its own
        // work in flight, and an opening is told whatever other SKUs do.
        if let Err(err) = schedule.run_once().await {
            tracing::error!(error = %err, "sale_schedule: pass failed; the next pass tries again");
        }
        crate::shutdown::sleep_or_cancel(interval, &cancel).await;
    }
    tracing::info!("reconciler: stopped");
}
