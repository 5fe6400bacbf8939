//! Placing an order: one script on a standalone Redis (`order.lua`), or the
//! intent protocol where no one script can hold every line — a Redis
//! Cluster, whose lines live on different slots, or a line on a split SKU,
//! whose units live in the buyer's bucket (docs/architecture.md, "Orders"):
//!
//! 0. every line's SKU loaded (from the layout cache, else one read each):
//!    an unknown or unloaded SKU is refused before anything is written;
//! 1. the intent (`HOLDING`, attempt *a*, a deadline) on the order's shard;
//! 2. each line held in ascending SKU order, tagged with the order and *a*;
//!    a hold past the deadline refuses itself;
//! 3. the commit (`HOLDING → RESERVED` before the deadline, with the order's
//!    one outbox entry) — or, when a line is refused, the undo: the intent
//!    `ABORTING`, every line whose hold was sent released (a tombstone on
//!    each refuses a late run of its hold; lines never sent hold nothing
//!    and get nothing), then `ABORTED`, and only then the refusal. The
//!    tombstones and the `ABORTED` record live until the deadline plus
//!    [`TOMBSTONE_MARGIN_MS`](crate::redis::order_holds::TOMBSTONE_MARGIN_MS),
//!    not a day.
//!
//! An api that dies midway leaves the intent `HOLDING`; the sweeper of any
//! api node (`order_sweeper.rs`) undoes it once its deadline passed — after
//! asking MySQL, which may hold the order when a failover lost its commit
//! (`order_recommit.rs`: then it is re-committed, nothing released). The
//! commit and the sweeper's abort check the same fields in the same slot,
//! so exactly one of them wins.

use futures_util::future::try_join_all;

use crate::domain::{OrderLine, OrderLines, RequestId, Requester, SkuId, UserId};
use crate::redis::keys::order_shard;
use crate::redis::order_holds::{Attempt, LineHold};
use crate::redis::order_intents::{AbortOutcome, AbortStep, CommitOutcome, IntentOutcome};
use crate::redis::{HeldLine, LineRefusal, OrderOutcome, OutboxStream, RedisError, RedisStore};

/// Holds every line of the order or none: one script where it can, the
/// intent protocol where it cannot. Asked by `requester`: the order records
/// its client, and another client's order id is [`OrderOutcome::Taken`]
/// (contract §6.2); [`Requester::Anyone`] where ownership is not enforced.
/// `carries_pass`: the order carries a verified pass (its lines on SKUs with
/// `requires_pass` need one; the scripts judge it).
pub async fn place(
    redis: &RedisStore,
    order_id: &RequestId,
    user_id: UserId,
    lines: &OrderLines,
    hold_timeout_ms: u64,
    requester: &Requester,
    carries_pass: bool,
) -> Result<OrderOutcome, RedisError> {
    if !redis.is_cluster() {
        let orders = redis.orders();
        let outcome = orders
            .reserve(order_id, user_id, lines, requester, carries_pass)
            .await?;
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
    line_by_line(
        redis,
        order_id,
        user_id,
        lines,
        hold_timeout_ms,
        requester,
        carries_pass,
    )
    .await
}

/// The intent protocol (module doc), asked by `requester`: the intent and
/// every line record its client.
pub async fn line_by_line(
    redis: &RedisStore,
    order_id: &RequestId,
    user_id: UserId,
    lines: &OrderLines,
    hold_timeout_ms: u64,
    requester: &Requester,
    carries_pass: bool,
) -> Result<OrderOutcome, RedisError> {
    if let Some(sku_id) = first_unloaded(redis, lines).await? {
        return Ok(OrderOutcome::Refused {
            sku_id,
            why: LineRefusal::NotLoaded,
        });
    }
    let orders = redis.orders();
    let mut attempt = match orders
        .intent(order_id, user_id, lines, hold_timeout_ms, requester)
        .await?
    {
        IntentOutcome::Hold(attempt) => attempt,
        IntentOutcome::Answered(outcome) => return Ok(outcome),
    };
    attempt.carries_pass = carries_pass;
    let mut held = Vec::with_capacity(lines.len());
    for (i, line) in lines.lines().iter().enumerate() {
        // The lines whose hold is sent: this one and those before it.
        let sent = &lines.lines()[..=i];
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
            Ok(LineHold::Taken) => OrderOutcome::Taken,
            Ok(LineHold::Aborted) => OrderOutcome::Retry(format!(
                "order {order_id} took longer than orders.hold_timeout_ms and was undone; retry"
            )),
            Ok(LineHold::Rebalancing) => OrderOutcome::Retry(format!(
                "SKU {}: stock is moving between buckets; retry shortly",
                line.sku_id
            )),
            Ok(LineHold::Contended) => {
                metrics::counter!("stockd_order_lines_contended_total").increment(1);
                OrderOutcome::Retry(format!(
                    "SKU {}: other orders not yet committed hold the units this line needs \
                     and may give them back; retry shortly",
                    line.sku_id
                ))
            }
            Err(err) => {
                // The hold may have run (a timeout): the undo covers it, and
                // its tombstone refuses it if it runs later.
                undo(redis, &attempt, sent).await?;
                return Err(err);
            }
        };
        undo(redis, &attempt, sent).await?;
        return Ok(refusal);
    }
    let availables: Vec<Option<i64>> = (held.iter())
        .map(|h| i64::try_from(h.available_after).ok())
        .collect();
    match orders.commit(&attempt, lines, &availables).await? {
        CommitOutcome::Committed { entry_id } => {
            let first = &mut held[0];
            first.stream = OutboxStream::of_order_shard(order_shard(order_id), first.sku_id);
            first.entry_id = entry_id;
            metrics::counter!("stockd_order_intents_total", "end" => "committed").increment(1);
            settle(redis, &attempt, lines);
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
            undo(redis, &attempt, lines.lines()).await?;
            Ok(OrderOutcome::Retry(format!(
                "order {order_id} took longer than orders.hold_timeout_ms and was undone; retry"
            )))
        }
    }
}

/// Every line of a committed attempt settled (`Reservations::settle_line`),
/// off the response path: the holds are sales now, so their pending notes
/// go and an emptied bucket is marked sold out.
fn settle(redis: &RedisStore, attempt: &Attempt, lines: &OrderLines) {
    let settler = redis.reservations().settler();
    let attempt = attempt.clone();
    let skus: Vec<SkuId> = lines.lines().iter().map(|l| l.sku_id).collect();
    tokio::spawn(async move {
        for sku_id in skus {
            if let Err(err) = settler.settle(&attempt, sku_id).await {
                tracing::debug!(order.id = %attempt.order_id, sku.id = %sku_id, error = %err,
                    "order line not settled: its note lapses at the attempt's deadline");
            }
        }
    });
}

/// The first line (in SKU order) whose SKU is not loaded into Redis, which
/// the routes answer as a standalone Redis's refusal of it (404
/// `SKU_NOT_FOUND`, or 503 when MySQL knows the SKU). Asked before the
/// intent, so an order naming SKUs that do not exist writes nothing; a
/// cached layout answers without a call, the others are read at once.
async fn first_unloaded(
    redis: &RedisStore,
    lines: &OrderLines,
) -> Result<Option<SkuId>, RedisError> {
    let buckets = redis.buckets();
    let loaded = try_join_all(lines.lines().iter().map(|l| buckets.loaded(l.sku_id))).await?;
    Ok(lines
        .lines()
        .iter()
        .zip(loaded)
        .find(|(_, loaded)| !loaded)
        .map(|(line, _)| line.sku_id))
}

/// The api gives up its own attempt: the intent `ABORTING`, then the lines
/// whose hold was `sent` released ([`release_lines`]). An attempt the
/// sweeper took meanwhile is released again (idempotent; the sweeper
/// releases every line) or found undone; one whose record is gone or
/// belongs to a later attempt (Redis lost the record and a retry started
/// over) was never committed, so its lines are released too. A committed
/// one is never released (an error: the caller answers 503, and the order
/// stands).
async fn undo(redis: &RedisStore, attempt: &Attempt, sent: &[OrderLine]) -> Result<(), RedisError> {
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
        _ => release_lines(redis, attempt, sent).await,
    }
}

/// Every line of an `ABORTING` attempt released, then the intent `ABORTED`:
/// the sweeper's undo, which cannot know which holds its dead api sent.
pub async fn release_all(
    redis: &RedisStore,
    attempt: &Attempt,
    lines: &OrderLines,
) -> Result<(), RedisError> {
    release_lines(redis, attempt, lines.lines()).await
}

/// `lines` of an `ABORTING` attempt released in SKU order (each gets its
/// tombstone, held or not: its hold was sent, and may run late), then the
/// intent `ABORTED`. A line whose hold was never sent needs neither: no
/// hold of it can come. Idempotent: the api and the sweeper may both run
/// it. An error leaves the intent `ABORTING`, and the sweeper finishes it
/// (every line) after the deadline.
async fn release_lines(
    redis: &RedisStore,
    attempt: &Attempt,
    lines: &[OrderLine],
) -> Result<(), RedisError> {
    for line in lines {
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
