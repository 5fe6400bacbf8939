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
//! The hold budget per buyer (`limits.buyer_max_live_units`) comes back with
//! them: each page's live rows (`RESERVED`) claim their line on their
//! buyer's budget again where Redis lost it ([`restore_budget`]), so after a
//! warm-up of every SKU a buyer's budget counts every live hold MySQL has.
//!
//! The work is bounded: pages of [`PAGE_ROWS`] ledger rows, each rebuilt by one
//! atomic script call of [`PAGE_ROWS`] records, so Redis is never blocked long
//! and sales go on between calls.

use std::collections::BTreeMap;

use crate::db::ledger::{self, reason, LedgerRow};
use crate::db::{Db, DbError};
use crate::domain::{ReservationStatus, SkuId, UserId};
use crate::redis::{BudgetLine, RebuildCounts, RebuildRow, RedisError, RedisStore};

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
        restore_budget(redis, &page).await?;
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

/// The budget claims of a page's live rows, written where missing (one
/// Redis call per buyer; none when the budget is off).
async fn restore_budget(redis: &RedisStore, page: &[LedgerRow]) -> Result<(), RedisError> {
    let budget = redis.budget();
    if !budget.is_on() {
        return Ok(());
    }
    let mut by_buyer: BTreeMap<UserId, Vec<BudgetLine>> = BTreeMap::new();
    for row in page {
        if row.status == ReservationStatus::Reserved {
            by_buyer.entry(row.user_id).or_default().push(BudgetLine {
                sku_id: row.sku_id,
                hold_id: row.request_id.clone(),
                units: row.count,
            });
        }
    }
    let restored = budget.restore(&by_buyer).await?;
    if restored > 0 {
        tracing::warn!(
            lines = restored,
            "rebuild: Redis had lost hold budget claims of live holds; restored from MySQL"
        );
    }
    Ok(())
}

impl From<RebuildError> for super::compare::CompareError {
    fn from(err: RebuildError) -> Self {
        match err {
            RebuildError::Db(e) => Self::Db(e),
            RebuildError::Redis(e) => Self::Redis(e),
        }
    }
}
