//! Creating and restocking a SKU: MySQL first (under the SKU row lock), then
//! Redis by a delta so live reservations are never clobbered. If Redis refuses
//! (the new total would drop below what Redis already promised) the MySQL
//! transaction rolls back: both stores keep their old values.
//!
//! The bucket count (`redis/buckets`) is set here too: at creation, or later
//! by a re-split, which is refused while any buyer state of the SKU lives in
//! Redis (records within retention, outbox entries, transfers).

use crate::db::{ledger, sku, Db, DbError};
use crate::domain::SkuId;
use crate::redis::buckets::Layout;
use crate::redis::{LoadOutcome, RedisError, RedisStore};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuState {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub available_mysql: i64,
    pub limit_per_user: u32,
    pub buckets: u16,
}

#[derive(Debug, thiserror::Error)]
pub enum SkuAdminError {
    #[error("total_stock {requested} is below the {reserved} units already reserved")]
    BelowReserved { requested: i64, reserved: i64 },
    #[error("the bucket count cannot change while buyer state lives in Redis: {0}")]
    BucketsLocked(String),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
}

/// Creates the SKU or sets its new total and limit (and, when given, its
/// bucket count), in MySQL and Redis.
pub async fn upsert(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    total: i64,
    limit_per_user: u32,
    buckets: Option<u16>,
) -> Result<SkuState, SkuAdminError> {
    tokio::time::timeout(
        db.operation_bound(),
        upsert_unbounded(db, redis, sku_id, total, limit_per_user, buckets),
    )
    .await
    .map_err(|_| SkuAdminError::Db(DbError::QueryTimeout))?
}

async fn upsert_unbounded(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    total: i64,
    limit_per_user: u32,
    buckets: Option<u16>,
) -> Result<SkuState, SkuAdminError> {
    let mut conn = db.conn().await?;
    let mut tx = conn
        .start_transaction(ledger::tx_opts())
        .await
        .map_err(DbError::from)?;
    let (delta, available_mysql, stored_buckets) = match sku::lock(&mut tx, sku_id).await? {
        None => {
            let n = buckets.unwrap_or(1);
            sku::insert(&mut tx, sku_id, total, limit_per_user, n).await?;
            (total, total, n)
        }
        Some(row) => {
            if total < row.reserved() {
                return Err(SkuAdminError::BelowReserved {
                    requested: total,
                    reserved: row.reserved(),
                });
            }
            let delta = total - row.total_stock;
            sku::restock(&mut tx, sku_id, delta, limit_per_user).await?;
            (delta, row.available_stock + delta, row.buckets)
        }
    };
    let wanted = buckets.unwrap_or(stored_buckets);
    let layout = layout_for(redis, sku_id, wanted, u64::from(limit_per_user)).await?;
    let loaded = redis
        .skus()
        .load_sku(
            &layout,
            delta,
            available_mysql,
            u64::from(limit_per_user),
            total as u64,
        )
        .await?;
    match loaded {
        LoadOutcome::Loaded { .. } => {}
        LoadOutcome::BelowReserved { available } => {
            return Err(SkuAdminError::BelowReserved {
                requested: total,
                reserved: total - available_mysql + (available_mysql - available),
            })
        }
        LoadOutcome::Layout => {
            return Err(SkuAdminError::BucketsLocked(
                "the bucket count changed in Redis meanwhile; retry".into(),
            ))
        }
    }
    if wanted != stored_buckets {
        sku::set_buckets(&mut tx, sku_id, wanted).await?;
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(SkuState {
        sku_id,
        total_stock: total,
        available_mysql,
        limit_per_user,
        buckets: wanted,
    })
}

/// The layout the SKU is to have: its current one when the count stays, a
/// fresh one for a SKU not loaded yet, or a re-split when nothing of its
/// buyers lives in Redis.
async fn layout_for(
    redis: &RedisStore,
    sku_id: SkuId,
    wanted: u16,
    limit_per_user: u64,
) -> Result<Layout, SkuAdminError> {
    let current = redis.buckets().read_layout(sku_id).await?;
    if current.n() == wanted {
        return Ok((*current).clone());
    }
    let fresh = redis.buckets().choose_layout(sku_id, wanted).await?;
    if redis.skus().sku(sku_id).await?.is_none() {
        return Ok(fresh);
    }
    if let Some(reason) = redis.buckets().buyer_state(&current).await? {
        return Err(SkuAdminError::BucketsLocked(reason));
    }
    redis
        .buckets()
        .resplit(&current, &fresh, limit_per_user)
        .await?;
    Ok(fresh)
}
