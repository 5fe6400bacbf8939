//! The sale's clock in the reconciler (docs/contract.md §19, "Scheduled
//! warm-up" and "Events"): each pass warms the SKUs whose sale opens within
//! `sale.warmup_lead_secs` and tells the openings and closings that passed.
//!
//! Why in the reconciler: it already runs on a schedule, compares the
//! stores and pages, and a warm-up is a comparison's cure; nothing else in
//! stockd runs on time alone. Why by Redis's `TIME`: it is the clock that
//! admits holds (§19), so `sale_opened` is never told before a hold could
//! be admitted, and every reconciler judges by the same clock.
//!
//! What makes it safe with restarts and several reconcilers: every step is
//! recorded in MySQL for the moment it was done for (`db::sale_schedule`),
//! and only the reconciler whose conditional UPDATE flips the marker stages
//! the event. Two reconcilers may warm one SKU at the same time; the
//! warm-up is idempotent, and only one of them tells it.

mod told;
mod warm;

use std::sync::Arc;

use crate::alert::Alerter;
use crate::config::ReconcileSettings;
use crate::db::Db;
use crate::domain::SkuId;
use crate::events::EventType;
use crate::mq::Publisher;
use crate::ops::compare::CompareError;
use crate::redis::RedisStore;

pub use warm::{WarmResult, NOT_WARMED};

/// Most SKUs warmed by one pass: each may wait up to
/// `reconcile.warmup_probe_wait_ms` for its probe, and the pass must end
/// well within an interval. The rest are warmed by the next passes,
/// soonest opening first.
pub const WARMUPS_PER_PASS: usize = 20;

/// Most openings and closings told by one pass (a short transaction each).
pub const TELLINGS_PER_PASS: usize = 500;

/// A warm-up not done this close to its opening pages: five minutes for an
/// operator to act (drain the pipeline, warm by hand) before buyers come.
pub const PAGE_BEFORE_OPENING_MS: i64 = 5 * 60 * 1_000;

/// What one pass did.
#[derive(Debug, Clone, Default)]
pub struct ScheduleReport {
    /// Every SKU due for a warm-up, and what became of it.
    pub warmups: Vec<(SkuId, WarmResult)>,
    /// Openings and closings this reconciler told (another may tell others).
    pub told: Vec<(SkuId, EventType)>,
}

/// One reconciler's schedule; built like every role's part, from the
/// shared resources.
pub struct SaleSchedule {
    db: Db,
    redis: Arc<RedisStore>,
    publisher: Arc<Publisher>,
    reconcile: ReconcileSettings,
    /// `sale.warmup_lead_secs` in ms; 0: no scheduled warm-up.
    lead_ms: i64,
    /// A SKU not warmed once its opening is this near pages: the larger of
    /// [`PAGE_BEFORE_OPENING_MS`] and two intervals (no retry is left
    /// before the opening then).
    page_within_ms: i64,
    /// Its own: a warm-up's page is not resolved by the SKU's healthy check.
    alerter: Alerter,
}

impl SaleSchedule {
    pub fn from_resources(res: &crate::resources::Resources) -> Self {
        let reconcile = res.settings.reconcile.clone();
        let two_intervals = 2 * reconcile.interval_ms as i64;
        Self {
            db: res.db.clone(),
            redis: res.redis.clone(),
            publisher: res.publisher.clone(),
            lead_ms: res.settings.sale.warmup_lead_secs as i64 * 1_000,
            page_within_ms: PAGE_BEFORE_OPENING_MS.max(two_intervals),
            alerter: Alerter::new(reconcile.clone()),
            reconcile,
        }
    }

    /// One pass: the due warm-ups, then the due openings and closings, all
    /// judged by one reading of Redis's clock.
    pub async fn run_once(&self) -> Result<ScheduleReport, CompareError> {
        let now_ms = self.redis.now_ms().await? as i64;
        let mut report = ScheduleReport::default();
        if self.lead_ms > 0 {
            report.warmups = self.warm_due(now_ms).await?;
        }
        report.told = told::tell_due(&self.db, now_ms, TELLINGS_PER_PASS).await?;
        Ok(report)
    }
}
