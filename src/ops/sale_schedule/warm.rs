//! The scheduled warm-up of one SKU before its sale opens: the manual
//! warm-up (`ops::warmup`, contract §8.1) from MySQL, then a comparison of
//! the stores that must say `OK`, then the marker for this opening with
//! `stockd.sku.sale_warmed` in its transaction.
//!
//! A refusal (work of this SKU in flight; another SKU's live sale does not
//! refuse it, the warm-up judges its own work) or a failure is retried by
//! the next pass, since no marker is set. It pages only once the opening is
//! near (`SaleSchedule::page_within_ms`): far ahead, the pipeline drains
//! and a retry succeeds on its own. The schedule's [`Alerter`] alerts once
//! per ongoing finding, so a SKU refused pass after pass pages once.
//!
//! [`Alerter`]: crate::alert::Alerter

use serde_json::json;

use super::SaleSchedule;
use crate::alert::Finding;
use crate::db::sale_schedule::{self, Marker, Window};
use crate::domain::SkuId;
use crate::events::{Event, EventType};
use crate::ops::compare::{compare, CompareError};
use crate::ops::reconcile::{classify, Verdict};
use crate::ops::warmup::{warmup, WarmupOutcome};

/// The alert's verdict for a SKU not warmed near its opening (with
/// `stockd_reconcile_alerts_total` and the webhook's body).
pub const NOT_WARMED: &str = "SALE_NOT_WARMED";

/// What became of one SKU's scheduled warm-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarmResult {
    /// Loaded from MySQL, checked `OK`, marked for this opening and told.
    Warmed { available: i64 },
    /// Loaded and checked, but another reconciler marked it first (or the
    /// window moved meanwhile): nothing told by this one.
    AlreadyDone,
    /// The warm-up refused: this SKU's work in flight (the reason).
    Refused(String),
    /// A store failed, or the SKU vanished.
    Failed(String),
    /// Loaded, but the stores do not agree after it.
    Inconsistent {
        verdict: Verdict,
        drift: i64,
        redis_available: Option<i64>,
        mysql_available: i64,
        in_flight: i64,
    },
}

impl SaleSchedule {
    /// Warms every SKU due (soonest opening first, at most
    /// [`super::WARMUPS_PER_PASS`]) and records each result.
    pub(super) async fn warm_due(
        &self,
        now_ms: i64,
    ) -> Result<Vec<(SkuId, WarmResult)>, CompareError> {
        let due =
            sale_schedule::due_warmups(&self.db, now_ms, self.lead_ms, super::WARMUPS_PER_PASS)
                .await?;
        let mut results = Vec::with_capacity(due.len());
        for window in due {
            let result = self.warm(&window, now_ms).await;
            self.record(&window, &result, now_ms).await;
            results.push((window.sku_id, result));
        }
        Ok(results)
    }

    /// One SKU: warm-up, check, marker.
    async fn warm(&self, window: &Window, now_ms: i64) -> WarmResult {
        let sku = window.sku_id;
        let loaded = warmup(
            &self.db,
            &self.redis,
            &self.publisher,
            sku,
            false,
            &self.reconcile,
        );
        let available = match Box::pin(loaded).await {
            Ok(WarmupOutcome::Warmed { available, .. }) => available,
            Ok(WarmupOutcome::Refused(reason)) => return WarmResult::Refused(reason),
            Ok(WarmupOutcome::NotFound) => return WarmResult::Failed("no such SKU".into()),
            Err(err) => return WarmResult::Failed(err.to_string()),
        };
        let obs = match compare(&self.db, &self.redis, sku, self.reconcile.max_winners).await {
            Ok(obs) => obs,
            Err(err) => return WarmResult::Failed(err.to_string()),
        };
        let (verdict, drift) = classify(&obs);
        if verdict != Verdict::Ok {
            return WarmResult::Inconsistent {
                verdict,
                drift,
                redis_available: obs.redis.as_ref().map(|r| r.available),
                mysql_available: obs.mysql_available,
                in_flight: obs.in_flight,
            };
        }
        let mut events = self.db.outgoing();
        let mut data = super::told::data(window);
        data["available"] = json!(available);
        // Sequenced, not named by the opening: a window moved away and back
        // is warmed (and told) again for the same opening, with other figures.
        events.push(Event::sku(
            EventType::SaleWarmed,
            sku,
            data,
            now_ms.max(0) as u64,
        ));
        let marked = sale_schedule::mark(
            &self.db,
            sku,
            Marker::Warmed,
            window.opens_ms,
            events,
            crate::clock::unix_ms(),
        );
        match marked.await {
            Ok(true) => WarmResult::Warmed { available },
            Ok(false) => WarmResult::AlreadyDone,
            Err(err) => WarmResult::Failed(err.to_string()),
        }
    }

    /// The result's metric and log line, and its page when the opening is
    /// near (resolved once the SKU is warmed).
    async fn record(&self, window: &Window, result: &WarmResult, now_ms: i64) {
        let sku = window.sku_id;
        let opens_in_ms = window.opens_ms - now_ms;
        let why = match result {
            WarmResult::Warmed { available } => {
                metrics::counter!("stockd_sale_warmups_total", "result" => "warmed").increment(1);
                tracing::info!(sku.id = %sku, available, opens_in_ms,
                    "sale_schedule.warmed: loaded from MySQL and checked OK before the opening");
                self.alerter.resolved(sku);
                return;
            }
            WarmResult::AlreadyDone => {
                self.alerter.resolved(sku);
                return;
            }
            WarmResult::Refused(reason) => {
                metrics::counter!("stockd_sale_warmups_total", "result" => "refused").increment(1);
                format!("refused: {reason}")
            }
            WarmResult::Failed(reason) => {
                metrics::counter!("stockd_sale_warmups_total", "result" => "failed").increment(1);
                format!("failed: {reason}")
            }
            WarmResult::Inconsistent { verdict, .. } => {
                metrics::counter!("stockd_sale_warmups_total", "result" => "inconsistent")
                    .increment(1);
                format!("checked {} after the warm-up", verdict.as_str())
            }
        };
        let page = opens_in_ms <= self.page_within_ms;
        tracing::warn!(sku.id = %sku, opens_in_ms, page, reason = %why,
            "sale_schedule.not_warmed: retried next pass");
        if page {
            self.alerter.raise(&finding(sku, result)).await;
        }
    }
}

/// The page of a SKU not warmed near its opening.
fn finding(sku_id: SkuId, result: &WarmResult) -> Finding {
    let mut finding = Finding {
        sku_id,
        verdict: NOT_WARMED,
        drift: 0,
        redis_available: None,
        mysql_available: 0,
        in_flight: 0,
        repaired: false,
    };
    if let WarmResult::Inconsistent {
        drift,
        redis_available,
        mysql_available,
        in_flight,
        ..
    } = result
    {
        finding.drift = *drift;
        finding.redis_available = *redis_available;
        finding.mysql_available = *mysql_available;
        finding.in_flight = *in_flight;
    }
    finding
}
