//! The comparison's reads, in their order: Redis' `available` once (t0), a
//! MySQL consistent snapshot (t1: the stock row, the live ledger units, the
//! last movement, the buyers over their limit), one atomic Redis snapshot
//! (t2: counters and, up to `max_winners`, every winner with its record's
//! status), then the ledger statuses of those winners inside the t1
//! snapshot. Why this order: the module documentation of
//! [`crate::ops::compare`].

use crate::db::ledger::snapshot::{begin_snapshot, ledger_statuses};
use crate::db::{ledger, sku, Db, DbError};
use crate::domain::SkuId;
use crate::redis::RedisStore;

use super::comparison::{CompareError, Comparison};
use super::explain::{count_missing, estimate, pair_winners};

/// One comparison of `sku_id`, bounded by `mysql.query_timeout_ms` like every
/// MySQL operation. `max_winners` bounds the Redis snapshot's list (0: the
/// counters only, the in-flight figure an estimate).
pub async fn compare(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    max_winners: usize,
) -> Result<Comparison, CompareError> {
    tokio::time::timeout(
        db.operation_bound(),
        compare_unbounded(db, redis, sku_id, max_winners),
    )
    .await
    .map_err(|_| CompareError::Db(DbError::QueryTimeout))?
}

async fn compare_unbounded(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    max_winners: usize,
) -> Result<Comparison, CompareError> {
    let mut conn = db.conn().await?;
    let available_before = redis.skus().sku(sku_id).await?.map(|s| s.available);
    let mut tx = begin_snapshot(&mut conn).await?;
    let row = sku::get(&mut tx, sku_id)
        .await?
        .ok_or(CompareError::UnknownSku(sku_id))?;
    let ledger_units = ledger::live_units(&mut tx, sku_id).await?;
    let moved_through = crate::db::movement_steps::moved_through(&mut tx, sku_id).await?;
    let buyers_over_limit = ledger::buyers_over_limit(&mut tx, sku_id, row.limit_per_user)
        .await?
        .len() as i64;
    let snapshot = redis.drift().snapshot(sku_id, max_winners).await?;
    let explained = match snapshot.as_ref().and_then(|s| s.winners.as_ref()) {
        Some(winners) => {
            let ids: Vec<&str> = winners.iter().map(|w| w.request_id.as_str()).collect();
            let statuses = ledger_statuses(&mut tx, sku_id, &ids).await?;
            let since_ms = recent_since_ms(redis).await?;
            let live = ledger::live_ids_since(&mut tx, sku_id, since_ms, max_winners + 1).await?;
            let mut explained = pair_winners(winners, &statuses);
            explained.missing_in_redis = count_missing(&live, winners, max_winners);
            explained
        }
        None => estimate(row.available_stock, available_before, snapshot.as_ref()),
    };
    tx.commit().await.map_err(DbError::from)?;
    Ok(Comparison {
        sku_id,
        total_stock: row.total_stock,
        mysql_available: row.available_stock,
        moved_through,
        ledger_units,
        redis: snapshot,
        in_flight: explained.in_flight,
        unapplied: explained.unapplied,
        unapplied_records: explained.unapplied_records,
        exact: explained.exact,
        missing_in_redis: explained.missing_in_redis,
        buyers_over_limit,
        decided_in_redis_only: explained.decided_in_redis_only,
    })
}

/// Rows a record of which Redis should hold for at least this long more are
/// compared; younger-than-retention rows only, with a margin for clock skew.
const MISSING_MARGIN_MS: u64 = 60_000;

/// Rows reserved after this time must still have their record in Redis.
async fn recent_since_ms(redis: &RedisStore) -> Result<u64, CompareError> {
    let now_ms = redis.now_ms().await?;
    Ok(now_ms.saturating_sub(redis.reservations().record_lifetime_ms()) + MISSING_MARGIN_MS)
}
