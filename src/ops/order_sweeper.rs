//! The recovery of orders held line by line (`order_saga.rs`): an api that
//! died or stalled between its intent and its commit leaves the intent
//! `HOLDING` in its shard's index. Every api node runs this sweeper: every
//! `orders.sweep_interval_ms` (1 s) it reads each shard's intents whose deadline passed, takes each
//! with the abort the commit races (`order_abort.lua`, step `sweep`: one of
//! the two wins), and releases every line. So a dead api's units are held
//! at most `orders.hold_timeout_ms` plus one sweep interval, never stranded,
//! and never both committed and released — while an api node runs, a pass
//! at a time, up to [`PER_SHARD`] intents per shard a pass. A call that
//! fails for one intent or shard is logged, counted and skipped; the pass
//! goes on. Several nodes sweeping the same intent cost repeats of
//! idempotent scripts.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::domain::RequestId;
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

/// One pass over every shard; returns how many intents it undid. A call
/// that fails for one intent (its abort or one line's release) or for one
/// shard (its index unread: a slot unreachable) is logged, counted
/// (`stockd_order_sweep_failures_total`, by `stage`) and skipped: the pass
/// goes on with the next intent and the next shard, and the next pass
/// tries the failed ones again. An error only when every shard failed.
pub async fn sweep_once(redis: &RedisStore) -> Result<usize, RedisError> {
    let mut undone = 0;
    let mut last_shard_error = None;
    let mut shards_failed = 0;
    for shard in 0..ORDER_SHARDS {
        let due = match redis.orders().due_intents(shard, 0, PER_SHARD).await {
            Ok(due) => due,
            Err(err) => {
                failed("shard", shard, None, &err);
                shards_failed += 1;
                last_shard_error = Some(err);
                continue;
            }
        };
        for order_id in due {
            match undo(redis, &order_id).await {
                Ok(true) => undone += 1,
                Ok(false) => {}
                Err(err) => failed("intent", shard, Some(&order_id), &err),
            }
        }
    }
    match last_shard_error {
        Some(err) if shards_failed == usize::from(ORDER_SHARDS) => Err(err),
        _ => Ok(undone),
    }
}

/// Takes one intent past its deadline and releases every line; true when
/// this pass undid it.
async fn undo(redis: &RedisStore, order_id: &RequestId) -> Result<bool, RedisError> {
    let taken = redis
        .orders()
        .abort(order_id, None, AbortStep::Sweep)
        .await?;
    let AbortOutcome::Undo { attempt, lines } = taken else {
        return Ok(false);
    };
    super::order_saga::release_all(redis, &attempt, &lines).await?;
    tracing::info!(order.id = %order_id, attempt = attempt.number, "order_sweeper: undid an order attempt past its deadline");
    metrics::counter!("stockd_order_intents_swept_total").increment(1);
    Ok(true)
}

fn failed(stage: &'static str, shard: u8, order_id: Option<&RequestId>, err: &RedisError) {
    metrics::counter!("stockd_order_sweep_failures_total", "stage" => stage).increment(1);
    let order = order_id.map(RequestId::as_str).unwrap_or("");
    tracing::warn!(shard, order.id = order, stage, error = %err,
        "order_sweeper: skipped after a failure; the pass goes on, the next one retries it");
}
