//! Warm-up: rebuild a SKU's whole admission state in Redis from MySQL (contract §8):
//! `available_stock` and SKU config, and — through [`super::rebuild`] — every
//! buyer's counter, a record and winners entry for every ledger row Redis would
//! still hold, and the sold-out marker. After it, a retry of any accepted
//! request id is a replay and no buyer can exceed the limit.
//!
//! It is the only path that loads a SKU that existed into a Redis that does
//! not hold it (an adjustment or a `PUT` answers 503 until it ran): the
//! buyer state comes back with the stock. It records the last movement of
//! stock its MySQL reading counts (`moved_through`), so a restock's Redis
//! step still pending for it moves nothing (`ops/stock_step.rs`), and it
//! never overwrites a newer one: a movement that reached Redis after that
//! reading, or a cut not yet settled, refuses it (forced or not).
//!
//! Refused while deductions of the SKU are in flight — outbox entries not yet
//! confirmed, reservations Redis took that MySQL has not applied, releases not
//! yet mirrored, or messages waiting in the work queue — because copying then
//! would hand out units twice. The work queue is shared by every SKU: rather
//! than wait for it to be empty, a warm-up sends a probe through it and reads
//! MySQL once the probe came through (`mq/probe.rs`), so one SKU can be
//! warmed while others sell. `force` proceeds anyway and subtracts the
//! reservations Redis still knows to be unapplied, so even a forced warm-up
//! does not put Redis above the truth for them.

use std::time::Duration;

use super::compare::{compare, CompareError};
use super::correction::{self, Correction};
use super::rebuild::rebuild_buyer_side;
use crate::config::ReconcileSettings;
use crate::db::movements::MovementKind;
use crate::db::Db;
use crate::domain::SkuId;
use crate::mq::Publisher;
use crate::redis::{AdjustOutcome, RedisStore};

/// How often a warm-up looks for its probe's mark.
const PROBE_POLL: Duration = Duration::from_millis(20);

/// Why a warm-up wrote nothing although nothing was in flight.
const MOVED_MEANWHILE: &str = "an adjustment or restock reached Redis after this warm-up read \
     MySQL (or a cut is being settled); retry";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WarmupOutcome {
    Warmed {
        available: i64,
        limit_per_user: u32,
    },
    /// In-flight work; the reason names it.
    Refused(String),
    NotFound,
}

pub async fn warmup(
    db: &Db,
    redis: &RedisStore,
    publisher: &Publisher,
    sku_id: SkuId,
    force: bool,
    settings: &ReconcileSettings,
) -> Result<WarmupOutcome, CompareError> {
    let mut reasons = Vec::new();
    if !force {
        // An unknown SKU is told at once, not after the probe's wait.
        if read_sku(db, sku_id).await?.is_none() {
            return Ok(WarmupOutcome::NotFound);
        }
        // Before MySQL is read: what the queue delivers meanwhile is in it.
        let wait = Duration::from_millis(settings.warmup_probe_wait_ms);
        if let Some(reason) = queue_not_passed(redis, publisher, wait).await? {
            reasons.push(reason);
        }
    }
    let obs = match compare(db, redis, sku_id, settings.max_winners).await {
        Ok(obs) => obs,
        Err(CompareError::UnknownSku(_)) => return Ok(WarmupOutcome::NotFound),
        Err(err) => return Err(err),
    };
    let outbox = redis.outbox().len(sku_id).await?;
    if outbox > 0 {
        reasons.push(format!(
            "{outbox} outbox entries not yet confirmed by the broker"
        ));
    }
    if obs.in_flight != 0 {
        reasons.push(format!(
            "{} units in flight between Redis and MySQL",
            obs.in_flight
        ));
    }
    if !reasons.is_empty() && !force {
        return Ok(WarmupOutcome::Refused(reasons.join("; ")));
    }
    let row = read_sku(db, sku_id).await?;
    let limit = row.map_or(1, |row| row.limit_per_user);
    let buckets = row.map_or(1, |row| row.buckets);
    let available = (obs.mysql_available - obs.unapplied).max(0);
    // The bucket layout first (the buyer side is rebuilt into the buyers'
    // buckets), then records, winners and buyer counters, then stock: the SKU
    // is not admitting (not loaded, or refused in flight) until `warm` below.
    let layout = redis.buckets().prepare_layout(sku_id, buckets).await?;
    // The sale terms before the stock: a SKU Redis lost never sells outside
    // its window (docs/contract.md §19).
    let terms = db
        .bounded(async {
            let mut conn = db.conn().await?;
            crate::db::sale::terms(&mut conn, sku_id).await
        })
        .await?
        .unwrap_or_default();
    redis.skus().set_sale_terms(&layout, &terms).await?;
    rebuild_buyer_side(db, redis, sku_id).await?;
    let warmed = redis
        .drift()
        .warm(
            &layout,
            available,
            obs.total_stock,
            limit,
            0,
            obs.moved_through,
        )
        .await?;
    if !warmed {
        // Even forced: the overwrite would lose a movement Redis has.
        return Ok(WarmupOutcome::Refused(MOVED_MEANWHILE.into()));
    }
    rebaseline_adjust(redis, sku_id, obs.total_stock, settings.max_winners).await?;
    tracing::info!(sku.id = %sku_id, available, forced = force, "warmup: loaded into Redis");
    let before = obs.redis.as_ref().map(|r| r.available);
    if before != Some(available) {
        let correction = Correction {
            sku_id,
            kind: MovementKind::Warmup,
            redis_before: before,
            redis_after: available,
            reason: if force { "warm-up (forced)" } else { "warm-up" },
            actor: correction::WARMUP,
        };
        if let Err(err) = correction::record(db, &correction).await {
            tracing::warn!(sku.id = %sku_id, error = %err, "warmup: the movement was not recorded (the warm-up stands)");
        }
    }
    Ok(WarmupOutcome::Warmed {
        available,
        limit_per_user: limit,
    })
}

/// The SKU's MySQL row, `None` for an unknown SKU.
async fn read_sku(db: &Db, sku_id: SkuId) -> Result<Option<crate::db::sku::SkuRow>, CompareError> {
    let row = db.bounded(async {
        let mut conn = db.conn().await?;
        crate::db::sku::get(&mut conn, sku_id).await
    });
    Ok(row.await?)
}

/// Why the deduct queue may still hold deductions of this SKU published
/// before the warm-up, or `None` when it does not: the queue is empty, or
/// the warm-up's probe came through it within `wait` (`mq/probe.rs`), so
/// other SKUs' sales do not hold one SKU's warm-up back.
async fn queue_not_passed(
    redis: &RedisStore,
    publisher: &Publisher,
    wait: Duration,
) -> Result<Option<String>, CompareError> {
    let queue = &publisher.topology().deduct_queue;
    let state = match publisher.queue_state(queue).await {
        Ok(state) => state,
        Err(err) => return Ok(Some(format!("queue depth unknown ({err})"))),
    };
    if state.messages == 0 {
        return Ok(None);
    }
    let queued = state.messages;
    // Sent even with no consumer attached: one may be restarting. A probe
    // left behind is passed by the next consumer and changes nothing.
    let idle = if state.consumers == 0 {
        " (no consumer was attached)"
    } else {
        ""
    };
    let id = uuid::Uuid::new_v4().to_string();
    if let Err(err) = publisher.publish_probe(&id).await {
        return Ok(Some(format!(
            "{queued} deduction messages queued; the probe could not be sent ({err})"
        )));
    }
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if redis.probes().passed(&id).await? {
            return Ok(None);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Some(format!(
                "{queued} deduction messages queued, and the queue did not pass this \
                 warm-up's probe within {} ms{idle}",
                wait.as_millis()
            )));
        }
        tokio::time::sleep(PROBE_POLL).await;
    }
}

/// Keeps Redis' own conservation true after a warm-up: whatever its records do
/// not explain becomes the `adjust` term. Read once the records are back; a
/// compare-and-set, retried when a reservation moved `available` meanwhile.
async fn rebaseline_adjust(
    redis: &RedisStore,
    sku_id: SkuId,
    total: i64,
    max_winners: usize,
) -> Result<(), CompareError> {
    const ATTEMPTS: usize = 3;
    for _ in 0..ATTEMPTS {
        let Some(snap) = redis.drift().snapshot(sku_id, max_winners).await? else {
            return Ok(());
        };
        let Some(units) = snap.recorded_units() else {
            return Ok(()); // too many winners to count: the reconciler estimates
        };
        let adjust = total - snap.available - units;
        if adjust == snap.adjust {
            return Ok(());
        }
        if let AdjustOutcome::Applied { .. } =
            redis.drift().adjust(sku_id, &snap, 0, adjust).await?
        {
            return Ok(());
        }
    }
    Ok(())
}
