//! The recovery of orders held line by line (`order_saga.rs`): an api that
//! died or stalled between its intent and its commit leaves the intent
//! `HOLDING` in its shard's index. Every api node runs this sweeper: every
//! `orders.sweep_interval_ms` (1 s) it reads each shard's intents whose
//! deadline passed and, for each, **asks MySQL first** (`order_recommit.rs`,
//! issue 50 D5): an order MySQL holds is re-committed from its row, nothing
//! released — a failover of the order's shard inside the replication lag
//! can lose a commit answered 201, and leave it `HOLDING` here while MySQL
//! has it. Only an order MySQL does not have is taken with the abort the
//! commit races (`order_abort.lua`, step `sweep`: one of the two wins), and
//! every line released. So a dead api's units are held at most
//! `orders.hold_timeout_ms` plus one sweep interval, never stranded, and
//! never both committed and released — while an api node runs and MySQL
//! answers, a pass at a time, up to [`PER_SHARD`] intents per shard a pass.
//! A MySQL that does not answer releases nothing: the intent is skipped
//! (it may be an order MySQL has) and the next pass asks again. A call that
//! fails for one intent or shard is logged, counted and skipped; the pass
//! goes on. Several nodes sweeping the same intent cost repeats of
//! idempotent scripts. The undo also gives the order's lines back to its
//! buyer's hold budget (`redis/budget.rs`), which the dead api had claimed.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::order_recommit::{recommit_if_mysql_holds, MysqlSays};
use super::order_sweep_error::SweepError;
use crate::db::Db;
use crate::domain::RequestId;
use crate::redis::keys::ORDER_SHARDS;
use crate::redis::order_intents::{AbortOutcome, AbortStep};
use crate::redis::{BudgetLine, RedisError, RedisStore};

/// Intents taken per shard per pass.
const PER_SHARD: usize = 100;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Intents undone: every line released, the intent `ABORTED`.
    pub undone: usize,
    /// Intents MySQL holds as orders, re-committed: nothing released.
    pub recommitted: usize,
    /// Intents skipped after a failure (MySQL or Redis): the next pass
    /// tries them again.
    pub skipped: usize,
}

/// Runs a pass every `every` until cancelled.
pub async fn run_until_stopped(
    redis: std::sync::Arc<RedisStore>,
    db: Db,
    every: Duration,
    cancel: CancellationToken,
) {
    while !cancel.is_cancelled() {
        if let Err(err) = sweep_once(&redis, &db).await {
            tracing::warn!(error = %err, "order_sweeper.pass: failed; next pass retries");
        }
        crate::shutdown::sleep_or_cancel(every, &cancel).await;
    }
}

/// One pass over every shard. A call that fails for one intent (MySQL's
/// answer, its re-commit, its abort or one line's release) or for one
/// shard (its index unread: a slot unreachable) is logged, counted
/// (`stockd_order_sweep_failures_total`, by `stage`) and skipped: the pass
/// goes on with the next intent and the next shard, and the next pass
/// tries the failed ones again. An error only when every shard failed.
pub async fn sweep_once(redis: &RedisStore, db: &Db) -> Result<Swept, RedisError> {
    let mut swept = Swept::default();
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
            match settle(redis, db, &order_id).await {
                Ok(Settled::Undone) => swept.undone += 1,
                Ok(Settled::Recommitted) => swept.recommitted += 1,
                Ok(Settled::Nothing) => {}
                Err(err) => {
                    swept.skipped += 1;
                    failed(err.stage(), shard, Some(&order_id), &err);
                }
            }
        }
    }
    match last_shard_error {
        Some(err) if shards_failed == usize::from(ORDER_SHARDS) => Err(err),
        _ => Ok(swept),
    }
}

/// What became of one due intent.
enum Settled {
    Undone,
    Recommitted,
    /// Not due any more, or not open (another sweeper or its api got there).
    Nothing,
}

/// MySQL first (module doc), then the undo of an order MySQL does not have.
async fn settle(redis: &RedisStore, db: &Db, order_id: &RequestId) -> Result<Settled, SweepError> {
    match recommit_if_mysql_holds(redis, db, order_id).await? {
        MysqlSays::Recommitted => Ok(Settled::Recommitted),
        MysqlSays::LeaveIt => Ok(Settled::Nothing),
        MysqlSays::NotAnOrder => Ok(match undo(redis, order_id).await? {
            true => Settled::Undone,
            false => Settled::Nothing,
        }),
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
    // The api that claimed the order's hold budget died before it could
    // give it back: the undo gives it back (by the lines' names: a no-op
    // when nothing was claimed, or given back already).
    let budget_lines: Vec<BudgetLine> = (lines.lines().iter())
        .map(|line| BudgetLine {
            sku_id: line.sku_id,
            hold_id: order_id.clone(),
            units: line.count,
        })
        .collect();
    redis
        .budget()
        .give_back(attempt.user_id, &budget_lines)
        .await?;
    tracing::info!(order.id = %order_id, attempt = attempt.number, "order_sweeper: undid an order attempt past its deadline");
    metrics::counter!("stockd_order_intents_swept_total").increment(1);
    Ok(true)
}

fn failed(
    stage: &'static str,
    shard: u8,
    order_id: Option<&RequestId>,
    err: &dyn std::fmt::Display,
) {
    metrics::counter!("stockd_order_sweep_failures_total", "stage" => stage).increment(1);
    let order = order_id.map(RequestId::as_str).unwrap_or("");
    tracing::warn!(shard, order.id = order, stage, error = %err,
        "order_sweeper: skipped after a failure; the pass goes on, the next one retries it");
}
