//! The recovery of orders held line by line (`order_saga.rs`): an api that
//! died or stalled between its intent and its commit leaves the intent
//! `HOLDING` in its shard's index. Every api node runs this sweeper: every
//! `orders.sweep_interval_ms` (1 s) it reads each shard's intents whose deadline passed, takes each
//! with the abort the commit races (`order_abort.lua`, step `sweep`: one of
//! the two wins), and releases every line. So a dead api's units are held
//! at most `orders.hold_timeout_ms` plus one sweep interval, never stranded,
//! and never both committed and released. Several nodes sweeping the same
//! intent cost repeats of idempotent scripts.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::redis::keys::ORDER_SHARDS;
use crate::redis::order_intents::{AbortOutcome, AbortStep};
use crate::redis::{RedisError, RedisStore};

/// Intents taken per shard per pass.
const PER_SHARD: usize = 100;

/// Runs a pass every `every` until cancelled.
pub async fn run_until_stopped(
    redis: std::sync::Arc<RedisStore>,
    every: Duration,
    cancel: CancellationToken,
) {
    while !cancel.is_cancelled() {
        if let Err(err) = sweep_once(&redis).await {
            tracing::warn!(error = %err, "order_sweeper.pass: failed; next pass retries");
        }
        crate::shutdown::sleep_or_cancel(every, &cancel).await;
    }
}

/// One pass over every shard; returns how many intents it undid.
pub async fn sweep_once(redis: &RedisStore) -> Result<usize, RedisError> {
    let mut undone = 0;
    for shard in 0..ORDER_SHARDS {
        for order_id in redis.orders().due_intents(shard, 0, PER_SHARD).await? {
            let taken = redis
                .orders()
                .abort(&order_id, None, AbortStep::Sweep)
                .await?;
            if let AbortOutcome::Undo { attempt, lines } = taken {
                super::order_saga::release_all(redis, &attempt, &lines).await?;
                tracing::info!(order.id = %order_id, attempt = attempt.number, "order_sweeper: undid an order attempt past its deadline");
                metrics::counter!("stockd_order_intents_swept_total").increment(1);
                undone += 1;
            }
        }
    }
    Ok(undone)
}
