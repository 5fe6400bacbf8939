//! The sweeper's re-commit (`order_recommit.lua`, issue 50 D5): an intent
//! past its deadline that MySQL holds as an order gets MySQL's status and
//! times back and leaves the index; nothing is released. A failover of the
//! order's shard inside the replication lag leaves such an intent (the
//! commit lost, the order published and applied). The MySQL side of the
//! decision is `ops/order_sweeper.rs`; this is the Redis half, which knows
//! no table, only what MySQL answered.

use super::keys::order_shard;
use super::orders::Orders;
use super::RedisError;
use crate::domain::{OrderLines, RequestId, ReservationStatus, UserId};

/// The order as MySQL holds it: what the record is re-committed to.
#[derive(Debug, Clone, Copy)]
pub struct HeldInMysql<'a> {
    pub order_id: &'a RequestId,
    /// With the lines: the record must be this very order, not an attempt
    /// of another buyer or other lines under the same id.
    pub user_id: UserId,
    pub lines: &'a OrderLines,
    pub status: ReservationStatus,
    /// The order row's time to pay (moved by any extension since).
    pub expires_ms: u64,
    pub extensions: u32,
}

/// What the re-commit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecommitOutcome {
    /// The record took MySQL's status; the attempt's number.
    Recommitted { attempt: u64 },
    /// The intent's deadline has not passed: its api may still commit.
    NotDue,
    /// The record is an attempt of another buyer or other lines: not the
    /// order MySQL holds, so the usual undo applies.
    Other,
    /// No open intent: the record's status (`MISSING` when there is none).
    NotOpen { status: String },
}

impl Orders {
    /// Re-commits the order's intent to what MySQL holds (module doc).
    pub async fn recommit(&self, held: HeldInMysql<'_>) -> Result<RecommitOutcome, RedisError> {
        let keys = &self.core.keys;
        let mut invocation = super::scripts::ORDER_RECOMMIT.prepare_invoke();
        invocation
            .key(keys.order(held.order_id))
            .key(keys.order_intents(order_shard(held.order_id)))
            .arg(held.order_id.as_str())
            .arg(held.user_id.get())
            .arg(held.lines.encode())
            .arg(held.status.as_str())
            .arg(held.expires_ms)
            .arg(held.extensions)
            .arg(self.args.retention_ms);
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        let bad = || RedisError::BadReply(format!("order recommit: {reply:?}"));
        Ok(match reply.first().map(String::as_str) {
            Some("RECOMMITTED") => RecommitOutcome::Recommitted {
                attempt: (reply.get(1))
                    .and_then(|a| a.parse().ok())
                    .ok_or_else(bad)?,
            },
            Some("NOT_DUE") => RecommitOutcome::NotDue,
            Some("OTHER") => RecommitOutcome::Other,
            Some("NO") => RecommitOutcome::NotOpen {
                status: reply.get(1).cloned().unwrap_or_default(),
            },
            _ => return Err(bad()),
        })
    }
}
