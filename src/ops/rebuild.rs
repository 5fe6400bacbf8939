//! Rebuild the buyer side of a SKU in Redis from MySQL (contract §8): reservation
//! records, winners entries and buyer counters of the ledger's rows, and lost
//! mirrors of final states. Shared by warm-up (Redis restarted empty) and by
//! the reconciler's repair (Redis lost acknowledged writes, e.g. a failover to
//! a lagging replica), so limits and replays hold after either.
//!
//! Only rows Redis would still hold are rebuilt: a record lives
//! `reservation.ttl_secs + redis.reservation_retention_secs` from its creation,
//! and so does a buyer's counter after their last reservation; older rows are
//! what Redis forgets by design. MySQL still enforces `limit_per_user` on every
//! row (the consumer's transaction), whatever Redis remembers.
//!
//! The work is bounded: pages of [`PAGE_ROWS`] ledger rows, each rebuilt by one
//! atomic script call of [`PAGE_ROWS`] records, so Redis is never blocked long
//! and sales go on between calls.

use crate::db::ledger::{self, reason};
use crate::db::{Db, DbError};
use crate::domain::{ReservationStatus, SkuId};
use crate::redis::{RebuildCounts, RebuildRow, RedisError, RedisStore};

/// Ledger rows read per page and rebuilt per script call (~1 ms of Redis).
const PAGE_ROWS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum RebuildError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
}

/// Rebuilds every ledger row of `sku_id` that Redis would still hold.
pub async fn rebuild_buyer_side(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
) -> Result<RebuildCounts, RebuildError> {
    let now_ms = redis.now_ms().await?;
    let lifetime_ms = redis.reservations().record_lifetime_ms();
    let window_start_ms = now_ms.saturating_sub(lifetime_ms);
    let mut counts = RebuildCounts::default();
    let mut after = String::new();
    loop {
        let page = db
            .bounded(async {
                let mut conn = db.conn().await?;
                ledger::page_since(&mut conn, sku_id, window_start_ms, &after, PAGE_ROWS).await
            })
            .await?;
        let Some(last) = page.last() else { break };
        after = last.request_id.to_string();
        let rows: Vec<RebuildRow> = page
            .iter()
            .filter_map(|row| {
                let keep_ms = (row.reserved_at_ms + lifetime_ms).checked_sub(now_ms)?;
                Some(RebuildRow {
                    request_id: row.request_id.clone(),
                    user_id: row.user_id,
                    count: row.count,
                    status: row.status,
                    created_ms: row.reserved_at_ms,
                    expires_ms: row.expires_at_ms,
                    keep_ms: keep_ms.max(1),
                    returns_stock: reason::rejection_returns_stock(row.reason.as_deref()),
                    lapsed: row.status == ReservationStatus::Released
                        && row.reason.as_deref() == Some(reason::EXPIRED),
                })
            })
            .collect();
        counts.add(redis.drift().rebuild_batch(sku_id, &rows).await?);
        if page.len() < PAGE_ROWS {
            break;
        }
    }
    if counts.restored + counts.finished > 0 {
        tracing::warn!(sku.id = %sku_id, restored = counts.restored, finished = counts.finished,
            unchanged = counts.unchanged,
            "rebuild: Redis had lost reservation records or mirrors; restored from MySQL");
    }
    Ok(counts)
}

impl From<RebuildError> for super::compare::CompareError {
    fn from(err: RebuildError) -> Self {
        match err {
            RebuildError::Db(e) => Self::Db(e),
            RebuildError::Redis(e) => Self::Redis(e),
        }
    }
}
