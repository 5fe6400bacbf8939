//! The reconciler's passes (contract §8): one comparison of the stores per SKU
//! ([`crate::ops::compare`]), its verdict
//! ([`verdict`]), and the repairs.
//!
//! - `MYSQL_INCONSISTENT`: `total - available != live ledger units`. Never
//!   repaired automatically: it pages.
//! - `REDIS_AHEAD`: Redis has more available than MySQL minus in-flight work —
//!   lost Redis writes (failover). Confirmed by an immediate second look, then
//!   repaired at once by a compare-and-set down to the truth.
//! - `MYSQL_BEHIND`: MySQL lost work it had acknowledged (a failover to a
//!   lagging replica) that Redis still proves: reservations the ledger lacks
//!   with the pipeline drained, or confirms and releases MySQL no longer has,
//!   each seen on two looks ([`mysql_behind`]). Repaired by re-applying them
//!   through the normal, idempotent paths.
//! - `STUCK`: work that stopped moving — deductions of the SKU in the deduct
//!   dead-letter queue, or reservations Redis took that MySQL still lacks after
//!   `reconcile.stuck_after_ms` (see [`super::stuck`]). Never repaired: the
//!   operator fixes the cause and runs `stockd dlq replay`.
//! - `REDIS_BEHIND`: Redis has less — leaked stock, or not loaded at all.
//!   Repaired only when two consecutive checks saw the same drift with nothing
//!   in flight; a SKU that is not loaded waits for an explicit warm-up.
//! - `IN_FLIGHT`: the stores differ exactly by work in flight. `OK`: no gap.
//!
//! One verdict per SKU, the most urgent: `MYSQL_INCONSISTENT` > `REDIS_AHEAD` >
//! `MYSQL_BEHIND` > `STUCK` > `REDIS_BEHIND` > `IN_FLIGHT` > `OK`. STUCK
//! outranks REDIS_BEHIND because a leak can only be judged (and repaired) once
//! the pipeline drained, which stuck work prevents; repairs still follow the
//! drift verdict beneath. The deduct DLQ is browsed once per pass (bounded by
//! [`DLQ_BROWSE_MAX`]), not once per SKU.

pub mod mysql_behind;
pub mod verdict;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use serde::Serialize;

use super::compare::{compare, CompareError, Comparison};
use super::dlq::{self, DlqFilter, DlqKind};
use super::rebuild::rebuild_buyer_side;
use super::stuck::{self, DeadLettered};
use crate::alert::{Alerter, Finding};
use crate::db::movements::MovementKind;
use crate::db::Db;
use crate::ops::correction::{self, Correction};

mod findings;
use crate::domain::SkuId;
use crate::mq::Publisher;
use crate::redis::{AdjustOutcome, RedisError, RedisStore};
use mysql_behind::{LostWork, Reapplied};
pub use verdict::{classify, escalate, Verdict};

/// Most dead letters one pass reads to find STUCK SKUs. A DLQ deeper than this
/// is an incident already (its alert fires); SKUs beyond the bound still turn
/// STUCK through the age of their in-flight records.
pub const DLQ_BROWSE_MAX: usize = 2_000;

/// One SKU's line of the report (contract §8), plus `drift` and Redis' own check.
#[derive(Debug, Clone, Serialize)]
pub struct SkuReport {
    pub sku_id: u64,
    pub verdict: Verdict,
    pub redis_available: Option<i64>,
    pub mysql_available: i64,
    pub ledger_units: i64,
    pub in_flight: i64,
    pub repaired: bool,
    pub drift: i64,
    pub redis_conserved: Option<bool>,
    /// Live ledger rows whose Redis record is missing (lost writes).
    pub missing_in_redis: i64,
    /// Buyers over `limit_per_user` in MySQL (makes the SKU MYSQL_INCONSISTENT).
    pub buyers_over_limit: i64,
    /// Units of STUCK work (dead-lettered, or in flight past the bound).
    pub stuck_units: i64,
    /// Where they sit: `dlq`, `in_flight` or `dlq+in_flight`; `null` if none.
    pub stuck_where: Option<&'static str>,
    /// Reservations and units MySQL lost (MYSQL_BEHIND), as two looks agree.
    pub lost_reservations: i64,
    pub lost_units: i64,
    /// Lost deductions published again, and lost confirms/releases applied
    /// again (with stranded order lines given back), by this check's repair.
    pub republished: usize,
    pub reapplied: usize,
    /// Suspected lost work this look could not confirm yet: a one-shot run
    /// looks again (`stockd reconcile --once`).
    #[serde(skip)]
    pub second_look_wanted: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub checked_at: String,
    pub skus: Vec<SkuReport>,
}

impl Report {
    pub fn healthy(&self) -> bool {
        self.skus.iter().all(|s| s.verdict.is_healthy())
    }

    /// Whether a second look a moment later could decide more: lost work seen
    /// once, or (when repairing) drift that must be stable to be repaired.
    pub fn second_look_wanted(&self, repair: bool) -> bool {
        (self.skus.iter())
            .any(|s| s.second_look_wanted || repair && s.verdict == Verdict::RedisBehind)
    }
}

pub struct Reconciler {
    db: Db,
    redis: std::sync::Arc<RedisStore>,
    alerter: Alerter,
    max_winners: usize,
    stuck_after_ms: u64,
    /// `reconcile.lost_after_ms`: youngest unapplied record that may be lost.
    lost_after_ms: u64,
    /// `orders.hold_timeout_ms + orders.sweep_interval_ms`: a line of an
    /// order attempt not committed is the order sweeper's; one older than
    /// this is logged (no sweeper undid it in time).
    sweep_bound_ms: u64,
    /// Reads the deduct DLQ and the work queues, and re-publishes lost
    /// deductions; `None` (no broker) finds STUCK by age only and never
    /// MYSQL_BEHIND's lost deductions (the pipeline cannot be seen drained).
    publisher: Option<std::sync::Arc<Publisher>>,
    /// Verdict and drift of the previous check, per SKU ("stable across checks").
    previous: Mutex<HashMap<SkuId, (Verdict, i64)>>,
    /// Request ids of the previous look's suspected lost work, per SKU.
    previous_lost: Mutex<HashMap<SkuId, HashSet<String>>>,
    last: Mutex<Option<Report>>,
    /// SKUs exported with a `sku` label (`metrics.sku_allowlist`).
    sku_allowlist: Vec<u64>,
}

impl Reconciler {
    pub fn new(
        db: Db,
        redis: std::sync::Arc<RedisStore>,
        settings: &crate::config::ReconcileSettings,
        sku_allowlist: Vec<u64>,
    ) -> Self {
        Self {
            db,
            redis,
            alerter: Alerter::new(settings.clone()),
            max_winners: settings.max_winners,
            stuck_after_ms: settings.stuck_after_ms,
            lost_after_ms: settings.lost_after_ms,
            // The defaults of `orders.*`; `from_resources` sets the configured one.
            sweep_bound_ms: 6_000,
            publisher: None,
            previous: Mutex::new(HashMap::new()),
            previous_lost: Mutex::new(HashMap::new()),
            last: Mutex::new(None),
            sku_allowlist,
        }
    }

    /// Built from the shared resources, like every role: the pools, the DLQ
    /// read through the publisher's connection, `reconcile.*` settings.
    pub fn from_resources(res: &crate::resources::Resources) -> Self {
        Self::new(
            res.db.clone(),
            res.redis.clone(),
            &res.settings.reconcile,
            res.settings.metrics.sku_allowlist.clone(),
        )
        .with_dead_letters(res.publisher.clone())
        .with_sweep_bound(
            res.settings.orders.hold_timeout_ms + res.settings.orders.sweep_interval_ms,
        )
    }

    /// The age past which a line of an uncommitted order attempt is logged.
    pub fn with_sweep_bound(mut self, ms: u64) -> Self {
        self.sweep_bound_ms = ms;
        self
    }

    /// Lets the reconciler read the deduct DLQ through `publisher`'s connection.
    pub fn with_dead_letters(mut self, publisher: std::sync::Arc<Publisher>) -> Self {
        self.publisher = Some(publisher);
        self
    }

    pub fn last_report(&self) -> Option<Report> {
        self.last.lock().expect("lock poisoned").clone()
    }

    /// Checks `skus` (every SKU in MySQL when empty), repairing if asked.
    pub async fn run_once(&self, skus: &[SkuId], repair: bool) -> Result<Report, CompareError> {
        let skus = if skus.is_empty() {
            let all = crate::db::sku::all_ids(&self.db).await?;
            // The registry lives on one Redis node: a failover of that node can
            // lose its latest additions, and the relay would then skip those
            // SKUs' outboxes. MySQL knows every SKU, so each full pass puts
            // them back.
            self.redis.skus().register_all(&all).await?;
            all
        } else {
            skus.to_vec()
        };
        self.finish_stock_steps(&skus).await;
        let dead = self.dead_lettered().await;
        let now_ms = self.redis.now_ms().await?;
        let mut lines = Vec::with_capacity(skus.len());
        for sku in skus {
            if repair {
                // Split SKUs: finish abandoned transfers, reach stranded stock.
                if let Err(err) = super::rebalance::rebalance(&self.redis, sku, now_ms / 1000).await
                {
                    tracing::warn!(sku.id = %sku, error = %err, "reconcile.rebalance: failed");
                }
            }
            let Some(line) = self.check_settled(sku, repair, &dead, now_ms).await? else {
                continue;
            };
            metrics::counter!("stockd_reconcile_verdicts_total", "verdict" => line.verdict.as_str()).increment(1);
            lines.push(line);
        }
        let drift_total: i64 = lines.iter().map(|l| l.drift.abs()).sum();
        metrics::gauge!("stockd_reconcile_drift_units_sum").set(drift_total as f64);
        let stuck_total: i64 = lines.iter().map(|l| l.stuck_units).sum();
        metrics::gauge!("stockd_reconcile_stuck_units_sum").set(stuck_total as f64);
        for line in lines
            .iter()
            .filter(|l| self.sku_allowlist.contains(&l.sku_id))
        {
            metrics::gauge!("stockd_reconcile_drift_units", "sku" => line.sku_id.to_string())
                .set(line.drift as f64);
        }
        metrics::gauge!("stockd_reconcile_last_success_timestamp_seconds")
            .set(crate::clock::unix_ms() as f64 / 1000.0);
        let report = Report {
            checked_at: crate::clock::rfc3339_ms(crate::clock::unix_ms()),
            skus: lines,
        };
        let previous = self
            .last
            .lock()
            .expect("lock poisoned")
            .replace(report.clone());
        self.tell(&report, previous.as_ref()).await;
        Ok(report)
    }

    /// Finishes the stock movements callers left between the stores (a
    /// restock not yet in Redis, a cut Redis took and never settled) before
    /// the pass looks, so they are never judged as drift
    /// ([`super::stock_step`]). A failure is logged; the pass goes on.
    async fn finish_stock_steps(&self, skus: &[SkuId]) {
        let older_than_ms = self.db.operation_bound().as_millis() as u64;
        // Boxed: the pass's future stays small (tests drive it on a thread's stack).
        let sweep = Box::pin(super::stock_step::sweep(
            &self.db,
            &self.redis,
            skus,
            older_than_ms,
        ));
        match sweep.await {
            Ok(swept) if swept != Default::default() => {
                tracing::info!(
                    restocks = swept.restocks_applied,
                    cuts = swept.cuts_settled,
                    "reconcile.stock_steps: finished movements their callers left"
                );
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "reconcile.stock_steps: not swept this pass"),
        }
    }

    /// Publishes the pass's findings (`stockd.reconcile.drift`: an unhealthy
    /// verdict, once until it changes; `stockd.reconcile.repaired`: every
    /// repair). A failure to stage them is logged; the report stands.
    async fn tell(&self, report: &Report, previous: Option<&Report>) {
        let out = findings::events(
            self.db.outgoing(),
            report,
            previous,
            crate::clock::unix_ms(),
        );
        if let Err(err) =
            crate::db::event_outbox::stage_alone(&self.db, out, crate::clock::unix_ms()).await
        {
            tracing::warn!(error = %err, "reconcile.events: findings not staged");
        }
    }

    /// Deductions in the deduct DLQ, by SKU. A broker failure is logged and
    /// treated as an empty DLQ: the Redis/MySQL checks still run, and stuck
    /// work still shows through its age.
    async fn dead_lettered(&self) -> DeadLettered {
        let Some(publisher) = &self.publisher else {
            return DeadLettered::new();
        };
        let filter = DlqFilter {
            kind: DlqKind::Deduct,
            sku: None,
            max_messages: DLQ_BROWSE_MAX,
        };
        match dlq::list(publisher, filter, &mut |_| {}).await {
            Ok(listing) => stuck::by_sku(&listing.deductions),
            Err(err) => {
                tracing::warn!(error = %err, "reconcile.dlq: dead-letter queue not read; STUCK judged by age only");
                DeadLettered::new()
            }
        }
    }

    /// [`Self::check`], retried while a split SKU's stock keeps moving
    /// between buckets; `None` (logged, counted) when it never settled.
    async fn check_settled(
        &self,
        sku: SkuId,
        repair: bool,
        dead: &DeadLettered,
        now_ms: u64,
    ) -> Result<Option<SkuReport>, CompareError> {
        const TRIES: usize = 3;
        let mut tries = 0;
        loop {
            tries += 1;
            match self.check(sku, repair, dead, now_ms).await {
                Err(CompareError::Redis(RedisError::Unsettled(reason))) if tries == TRIES => {
                    metrics::counter!("stockd_reconcile_unsettled_total").increment(1);
                    tracing::warn!(sku.id = %sku, %reason, "reconcile: not judged this pass");
                    return Ok(None);
                }
                Err(CompareError::Redis(RedisError::Unsettled(_))) => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => return other.map(Some),
            }
        }
    }

    async fn check(
        &self,
        sku: SkuId,
        repair: bool,
        dead: &DeadLettered,
        now_ms: u64,
    ) -> Result<SkuReport, CompareError> {
        let (obs, verdict, drift, mut repaired) = self.judge_drift(sku, repair).await?;
        let (lost, second_look_wanted) = self.lost_work(&obs, dead, now_ms).await?;
        let mut reapplied = Reapplied::default();
        if repair && !lost.is_empty() {
            if let Some(publisher) = &self.publisher {
                reapplied =
                    mysql_behind::reapply(&self.db, &self.redis, publisher, sku, &lost, now_ms)
                        .await?;
                repaired = true;
                // What was re-applied is judged afresh over two new looks.
                self.previous_lost
                    .lock()
                    .expect("lock poisoned")
                    .remove(&sku);
            }
        }
        let lost_ids = lost.ids();
        let still_moving: Vec<_> = (obs.unapplied_records.iter())
            .filter(|r| !lost_ids.contains(&r.request_id))
            .cloned()
            .collect();
        let stuck = stuck::stuck(dead.get(&sku), &still_moving, now_ms, self.stuck_after_ms);
        let line = SkuReport {
            sku_id: sku.get(),
            verdict: escalate(verdict, &stuck, &lost),
            redis_available: obs.redis.as_ref().map(|r| r.available),
            mysql_available: obs.mysql_available,
            ledger_units: obs.ledger_units,
            in_flight: obs.in_flight,
            repaired,
            drift,
            redis_conserved: obs.redis.as_ref().and_then(|r| r.internally_conserved()),
            missing_in_redis: obs.missing_in_redis,
            buyers_over_limit: obs.buyers_over_limit,
            stuck_units: stuck.units,
            stuck_where: stuck.place,
            lost_reservations: lost.reservations(),
            lost_units: lost.units(),
            republished: reapplied.republished,
            reapplied: reapplied.transitions + reapplied.stranded_released,
            second_look_wanted,
        };
        self.alert(&line).await;
        Ok(line)
    }

    /// One comparison's drift verdict (with a second look where a change
    /// between the reads could explain it) and the drift repairs.
    async fn judge_drift(
        &self,
        sku: SkuId,
        repair: bool,
    ) -> Result<(Comparison, Verdict, i64, bool), CompareError> {
        let mut obs = compare(&self.db, &self.redis, sku, self.max_winners).await?;
        let (mut verdict, mut drift) = classify(&obs);
        if matches!(verdict, Verdict::RedisAhead | Verdict::RedisBehind) {
            // A second look filters a change that landed between the two reads.
            obs = compare(&self.db, &self.redis, sku, self.max_winners).await?;
            (verdict, drift) = classify(&obs);
        }
        let previous = self
            .previous
            .lock()
            .expect("lock poisoned")
            .insert(sku, (verdict, drift));
        let mut repaired = false;
        if repair && verdict == Verdict::RedisAhead && obs.redis.is_some() {
            // Lost writes: records, winners and buyer counters first (limits
            // and replays), then look again and bring the stock down.
            let counts = rebuild_buyer_side(&self.db, &self.redis, sku).await?;
            repaired = counts.restored + counts.finished > 0;
            obs = compare(&self.db, &self.redis, sku, self.max_winners).await?;
            (verdict, drift) = classify(&obs);
        }
        if repair {
            repaired |= self.repair(&obs, verdict, drift, previous).await?;
        }
        Ok((obs, verdict, drift, repaired))
    }

    /// Lost MySQL work that this look and the previous one agree on, and
    /// whether this look suspects more that a next look may confirm.
    async fn lost_work(
        &self,
        obs: &Comparison,
        dead: &DeadLettered,
        now_ms: u64,
    ) -> Result<(LostWork, bool), CompareError> {
        let sku = obs.sku_id;
        let drained = !obs.unapplied_records.is_empty() && self.pipeline_drained(sku).await?;
        let mut suspects =
            mysql_behind::suspects(obs, drained, dead.get(&sku), now_ms, self.lost_after_ms);
        // Lines of order attempts not committed are the order sweeper's.
        mysql_behind::leave_open_lines(
            &self.redis,
            sku,
            &mut suspects,
            now_ms,
            self.sweep_bound_ms,
        )
        .await?;
        let earlier = (self.previous_lost.lock().expect("lock poisoned"))
            .insert(sku, suspects.ids())
            .unwrap_or_default();
        let lost = suspects.clone().seen_before(&earlier);
        let second_look_wanted = lost.reservations() < suspects.reservations();
        Ok((lost, second_look_wanted))
    }

    /// Nothing can still be carrying a deduction of `sku` to MySQL: its outbox
    /// is empty, then (read after it) the deduct and retry queues hold no ready
    /// message. Without a broker, or when it cannot be read: false.
    async fn pipeline_drained(&self, sku: SkuId) -> Result<bool, CompareError> {
        let Some(publisher) = &self.publisher else {
            return Ok(false);
        };
        if self.redis.outbox().len(sku).await? > 0 {
            return Ok(false);
        }
        let topology = publisher.topology();
        for queue in [&topology.deduct_queue, &topology.deduct_retry_queue] {
            match publisher.queue_depth(queue).await {
                Ok(0) => {}
                Ok(_) => return Ok(false),
                Err(err) => {
                    tracing::warn!(error = %err, queue = %queue, "reconcile: work queue not read; lost work not judged");
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Raises the line's finding, or resolves the SKU's alert when healthy.
    async fn alert(&self, line: &SkuReport) {
        let Ok(sku) = SkuId::new(line.sku_id) else {
            return;
        };
        if line.verdict.is_healthy() {
            self.alerter.resolved(sku);
            return;
        }
        let finding = Finding {
            sku_id: sku,
            verdict: line.verdict.as_str(),
            drift: line.drift,
            redis_available: line.redis_available,
            mysql_available: line.mysql_available,
            in_flight: line.in_flight,
            repaired: line.repaired,
        };
        self.alerter.raise(&finding).await;
    }

    /// Whether a movement of `sku` is between the stores (an error counts
    /// as yes: the repair waits a pass).
    async fn stock_step_in_progress(&self, sku: SkuId) -> Result<bool, CompareError> {
        Ok(super::stock_step::in_progress(&self.db, &self.redis, sku)
            .await
            .unwrap_or(true))
    }

    async fn repair(
        &self,
        obs: &Comparison,
        verdict: Verdict,
        drift: i64,
        previous: Option<(Verdict, i64)>,
    ) -> Result<bool, CompareError> {
        let Some(redis) = &obs.redis else {
            return Ok(false); // not loaded: an operator warms it up
        };
        let allowed = match verdict {
            Verdict::RedisAhead => true,
            Verdict::RedisBehind => {
                let stable = previous == Some((verdict, drift));
                let drained = obs.exact
                    && obs.in_flight == 0
                    && self.redis.outbox().len(obs.sku_id).await? == 0;
                // A movement between the stores closes the gap itself.
                stable && drained && !self.stock_step_in_progress(obs.sku_id).await?
            }
            _ => false,
        };
        if !allowed {
            return Ok(false);
        }
        let new_available = redis.available - drift;
        let new_adjust = match redis.recorded_units() {
            Some(units) => redis.total - new_available - units,
            None => redis.adjust + drift,
        };
        let outcome = self
            .redis
            .drift()
            .adjust(obs.sku_id, redis, -drift, new_adjust)
            .await?;
        let applied = matches!(outcome, AdjustOutcome::Applied { .. });
        if applied {
            tracing::warn!(sku.id = %obs.sku_id, verdict = verdict.as_str(), drift_units = drift,
                "reconcile.repair: Redis available brought to the truth");
            let correction = Correction {
                sku_id: obs.sku_id,
                kind: MovementKind::Repair,
                redis_before: Some(redis.available),
                redis_after: new_available,
                reason: verdict.as_str(),
                actor: correction::RECONCILER,
            };
            if let Err(err) = correction::record(&self.db, &correction).await {
                tracing::warn!(sku.id = %obs.sku_id, error = %err, "reconcile.repair: the movement was not recorded (the repair stands)");
            }
            self.previous
                .lock()
                .expect("lock poisoned")
                .remove(&obs.sku_id);
        }
        Ok(applied)
    }
}
