//! The sweeper asks MySQL before it undoes an intent past its deadline
//! (issue 50 D5). An intent `HOLDING` past its deadline usually is an api
//! that died between its holds, and MySQL has never heard of the order. But
//! a failover of the order's shard inside the replication lag can lose a
//! commit the api answered 201 for: the replica had the intent, not the
//! commit, so the record is `HOLDING` again and back in the index, while
//! the order was published and MySQL applied it. Undoing it would release
//! every surviving line on the other shards: units available in Redis that
//! MySQL has sold. So an order MySQL holds (same buyer, same lines) is
//! re-committed instead: the record takes the order row's status and times
//! (`order_recommit.lua`) and leaves the index; its lines stay held.
//!
//! **No double deduction can follow.** The re-commit writes no outbox entry
//! and publishes nothing: MySQL applied the order from the one message of
//! its commit. Should that message be delivered again, or the relay
//! republish an entry that survived, the consumer finds the order row and
//! takes the whole order as a duplicate, told again from the row and never
//! applied twice (`db/ledger/apply_order.rs`: the order row and its line
//! rows are keyed by the order id). The lines keep their holds of the very
//! attempt MySQL applied, so each unit is counted once in each store.
//!
//! What MySQL's answer cannot cover: a lost commit whose message the
//! consumer has not applied yet when the deadline passes (a consumer
//! further behind than `orders.hold_timeout_ms`) finds no row and is
//! undone; the consumer then applies an order Redis released, and the
//! reconciler brings Redis back to MySQL (`REDIS_AHEAD`), as for single
//! reservations lost by a failover.

use super::order_sweep_error::SweepError;
use crate::db::{orders, Db};
use crate::domain::RequestId;
use crate::redis::order_recommit::{HeldInMysql, RecommitOutcome};
use crate::redis::RedisStore;

/// What MySQL's answer decided for one due intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MysqlSays {
    /// MySQL holds the order: the record was re-committed from its row.
    Recommitted,
    /// MySQL has no such order (no row, or another buyer or other lines
    /// under the id): the intent is an attempt to undo.
    NotAnOrder,
    /// Nothing for the sweeper: the intent is not due any more or not open
    /// (its api, or another sweeper, got there).
    LeaveIt,
}

/// Asks MySQL for the order of a due intent and re-commits the intent when
/// MySQL holds it. An error from MySQL (down, slow: bounded by
/// `mysql.query_timeout_ms`) means "unknown", and the caller undoes nothing.
pub async fn recommit_if_mysql_holds(
    redis: &RedisStore,
    db: &Db,
    order_id: &RequestId,
) -> Result<MysqlSays, SweepError> {
    let row = db
        .bounded(async {
            let mut conn = db.conn().await?;
            orders::find(&mut conn, order_id).await
        })
        .await?;
    let Some(row) = row else {
        return Ok(MysqlSays::NotAnOrder);
    };
    let held = HeldInMysql {
        order_id,
        user_id: row.user_id,
        lines: &row.lines,
        status: row.status,
        expires_ms: row.expires_at_ms,
        extensions: row.extensions,
    };
    Ok(match redis.orders().recommit(held).await? {
        RecommitOutcome::Recommitted { attempt } => {
            tracing::warn!(order.id = %order_id, attempt, status = row.status.as_str(),
                "order_sweeper: an intent past its deadline is an order MySQL holds (a commit \
                 lost by Redis); re-committed from MySQL, nothing released");
            metrics::counter!("stockd_order_intents_recommitted_total").increment(1);
            MysqlSays::Recommitted
        }
        RecommitOutcome::Other => MysqlSays::NotAnOrder,
        RecommitOutcome::NotDue | RecommitOutcome::NotOpen { .. } => MysqlSays::LeaveIt,
    })
}
