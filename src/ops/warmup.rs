//! Warm-up: copy MySQL's `available_stock` and SKU config into Redis (SPEC §8).
//!
//! Refused while deductions of the SKU are in flight — outbox entries not yet
//! confirmed, reservations Redis took that MySQL has not applied, releases not
//! yet mirrored, or messages waiting in the work queue — because copying then
//! would hand out units twice. `force` proceeds anyway and subtracts the
//! reservations Redis still knows to be unapplied, so even a forced warm-up
//! does not put Redis above the truth for them.

use super::observe::{observe, ObserveError};
use crate::db::Db;
use crate::domain::SkuId;
use crate::mq::Publisher;
use crate::redis::RedisStore;

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
    max_winners: usize,
) -> Result<WarmupOutcome, ObserveError> {
    let obs = match observe(db, redis, sku_id, max_winners).await {
        Ok(obs) => obs,
        Err(ObserveError::UnknownSku(_)) => return Ok(WarmupOutcome::NotFound),
        Err(err) => return Err(err),
    };
    let mut reasons = Vec::new();
    let outbox = redis.outbox_len(sku_id).await?;
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
    let queue = &publisher.topology().deduct_queue;
    match publisher.queue_depth(queue).await {
        Ok(0) => {}
        Ok(n) => reasons.push(format!("{n} deduction messages queued")),
        Err(err) => reasons.push(format!("queue depth unknown ({err})")),
    }
    if !reasons.is_empty() && !force {
        return Ok(WarmupOutcome::Refused(reasons.join("; ")));
    }
    let limit = crate::db::sku::get(&mut db.conn().await?, sku_id)
        .await?
        .map_or(1, |row| row.limit_per_user);
    let available = (obs.mysql_available - obs.unapplied).max(0);
    // Keep Redis' own conservation true: whatever its records do not explain
    // becomes the adjustment term.
    let recorded = obs
        .redis
        .as_ref()
        .and_then(|r| r.recorded_units())
        .unwrap_or(0);
    let adjust = obs.total_stock - available - recorded;
    redis
        .warm(sku_id, available, obs.total_stock, limit, adjust)
        .await?;
    tracing::info!(sku.id = %sku_id, available, forced = force, "warmup: loaded into Redis");
    Ok(WarmupOutcome::Warmed {
        available,
        limit_per_user: limit,
    })
}
