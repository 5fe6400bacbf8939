//! Placing an order: one script on a standalone Redis (`order.lua`), or the
//! intent protocol where no one script can hold every line — a Redis
//! Cluster, whose lines live on different slots, or a line on a split SKU,
//! whose units live in the buyer's bucket (docs/architecture.md, "Orders"):
//!
//! 1. the intent (`HOLDING`, attempt *a*, a deadline) on the order's shard;
//! 2. each line held in ascending SKU order, tagged with the order and *a*;
//! 3. the commit (`HOLDING → RESERVED` before the deadline, with the order's
//!    one outbox entry) — or, when a line is refused, the undo: the intent
//!    `ABORTING`, every line released (a tombstone on each refuses a late
//!    hold of *a*), then `ABORTED`, and only then the refusal.
//!
//! An api that dies midway leaves the intent `HOLDING`; the sweeper of any
//! api node (`order_sweeper.rs`) undoes it once its deadline passed. The
//! commit and the sweeper's abort check the same fields in the same slot,
//! so exactly one of them wins.

use crate::domain::{OrderLines, RequestId, UserId};
use crate::redis::keys::order_shard;
use crate::redis::order_holds::{Attempt, LineHold};
use crate::redis::order_intents::{AbortOutcome, AbortStep, CommitOutcome, IntentOutcome};
use crate::redis::{HeldLine, LineRefusal, OrderOutcome, OutboxStream, RedisError, RedisStore};

/// Holds every line of the order or none: one script where it can, the
/// intent protocol where it cannot.
pub async fn place(
    redis: &RedisStore,
    order_id: &RequestId,
    user_id: UserId,
    lines: &OrderLines,
    hold_timeout_ms: u64,
) -> Result<OrderOutcome, RedisError> {
    if !redis.is_cluster() {
        let outcome = redis.orders().reserve(order_id, user_id, lines).await?;
        // A split SKU's units live in the buyer's bucket, where the script
        // cannot reach: it refused before writing anything.
        if !matches!(
            outcome,
            OrderOutcome::Refused {
                why: LineRefusal::Split,
                ..
            }
        ) {
            return Ok(outcome);
        }
    }
    line_by_line(redis, order_id, user_id, lines, hold_timeout_ms).await
}

/// The intent protocol (module doc).
pub async fn line_by_line(
    redis: &RedisStore,
    order_id: &RequestId,
    user_id: UserId,
    lines: &OrderLines,
    hold_timeout_ms: u64,
) -> Result<OrderOutcome, RedisError> {
    let orders = redis.orders();
    let attempt = match orders
        .intent(order_id, user_id, lines, hold_timeout_ms)
        .await?
    {
        IntentOutcome::Hold(attempt) => attempt,
        IntentOutcome::Replayed {
            status,
            created_ms,
            expires_ms,
        } => {
            return Ok(OrderOutcome::Replayed {
                status,
                created_ms,
                expires_ms,
            })
        }
        IntentOutcome::Mismatch => return Ok(OrderOutcome::Mismatch),
        IntentOutcome::Backpressure => return Ok(OrderOutcome::Backpressure),
        IntentOutcome::Busy => {
            return Ok(OrderOutcome::Retry(format!(
                "order {order_id} is being held or undone by another request; retry shortly"
            )))
        }
    };
    let mut held = Vec::with_capacity(lines.len());
    for line in lines.lines() {
        let hold = redis
            .reservations()
            .hold_line(&attempt, line.sku_id, line.count)
            .await;
        let refusal = match hold {
            Ok(LineHold::Held { available_after }) => {
                held.push(HeldLine {
                    sku_id: line.sku_id,
                    count: line.count,
                    stream: OutboxStream::of_sku(line.sku_id),
                    entry_id: String::new(),
                    available_after,
                });
                continue;
            }
            Ok(LineHold::Refused(why)) => OrderOutcome::Refused {
                sku_id: line.sku_id,
                why,
            },
            Ok(LineHold::Mismatch) => OrderOutcome::Mismatch,
            Ok(LineHold::Aborted) => OrderOutcome::Retry(format!(
                "order {order_id} took longer than orders.hold_timeout_ms and was undone; retry"
            )),
            Ok(LineHold::Rebalancing) => OrderOutcome::Retry(format!(
                "SKU {}: stock is moving between buckets; retry shortly",
                line.sku_id
            )),
            Err(err) => {
                // The hold may have run (a timeout): the undo covers it, and
                // its tombstone refuses it if it runs later.
                undo(redis, &attempt, lines).await?;
                return Err(err);
            }
        };
        undo(redis, &attempt, lines).await?;
        return Ok(refusal);
    }
    match orders.commit(&attempt, lines).await? {
        CommitOutcome::Committed { entry_id } => {
            let first = &mut held[0];
            first.stream = OutboxStream::of_order_shard(order_shard(order_id), first.sku_id);
            first.entry_id = entry_id;
            metrics::counter!("stockd_order_intents_total", "end" => "committed").increment(1);
            Ok(OrderOutcome::Reserved {
                created_ms: attempt.created_ms,
                expires_ms: attempt.expires_ms,
                lines: held,
            })
        }
        // The first call ran and its reply was lost: the order stands, and
        // the relay publishes its outbox entry.
        CommitOutcome::AlreadyCommitted => Ok(OrderOutcome::Retry(format!(
            "order {order_id} is held; its hand-off is pending: retry to read it"
        ))),
        CommitOutcome::Late | CommitOutcome::Lost => {
            undo(redis, &attempt, lines).await?;
            Ok(OrderOutcome::Retry(format!(
                "order {order_id} took longer than orders.hold_timeout_ms and was undone; retry"
            )))
        }
    }
}

/// The api gives up its own attempt: the intent `ABORTING`, then
/// [`release_all`]. An attempt the sweeper took meanwhile is released
/// again (idempotent) or found undone; one whose record is gone or belongs
/// to a later attempt (Redis lost the record and a retry started over) was
/// never committed, so its lines are released too. A committed one is never
/// released (an error: the caller answers 503, and the order stands).
async fn undo(redis: &RedisStore, attempt: &Attempt, lines: &OrderLines) -> Result<(), RedisError> {
    let taken = redis
        .orders()
        .abort(&attempt.order_id, Some(attempt.number), AbortStep::Own)
        .await?;
    match taken {
        AbortOutcome::Nothing {
            status,
            attempt: Some(number),
        } if number == attempt.number => match status.as_str() {
            "ABORTED" => Ok(()),
            _ => Err(RedisError::BadReply(format!(
                "order {}: attempt {number} is {status}, not undone",
                attempt.order_id
            ))),
        },
        _ => release_all(redis, attempt, lines).await,
    }
}

/// Every line of an `ABORTING` attempt released in SKU order (the ones
/// never held get their tombstone), then the intent `ABORTED`. Idempotent:
/// the api and the sweeper may both run it. An error leaves the intent
/// `ABORTING`, and the sweeper finishes it after the deadline.
pub async fn release_all(
    redis: &RedisStore,
    attempt: &Attempt,
    lines: &OrderLines,
) -> Result<(), RedisError> {
    for line in lines.lines() {
        if redis
            .reservations()
            .release_line(attempt, line.sku_id)
            .await?
        {
            crate::ops::lifecycle::reopen_split_sku(redis, line.sku_id).await;
        }
    }
    let done = redis
        .orders()
        .abort(&attempt.order_id, Some(attempt.number), AbortStep::Done)
        .await?;
    if done == AbortOutcome::Done {
        metrics::counter!("stockd_order_intents_total", "end" => "undone").increment(1);
    }
    Ok(())
}
