//! Creating and restocking a SKU: MySQL first (under the SKU row lock), then
//! Redis by a delta so live reservations are never clobbered. If Redis refuses
//! (the new total would drop below what Redis already promised) the MySQL
//! transaction rolls back: both stores keep their old values.

use crate::db::{ledger, sku, Db, DbError};
use crate::domain::SkuId;
use crate::redis::{LoadOutcome, RedisError, RedisStore};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuState {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub available_mysql: i64,
    pub available_redis: i64,
    pub limit_per_user: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum SkuAdminError {
    #[error("total_stock {requested} is below the {reserved} units already reserved")]
    BelowReserved { requested: i64, reserved: i64 },
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
}

/// Creates the SKU or sets its new total and limit, in MySQL and Redis.
pub async fn upsert(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    total: i64,
    limit_per_user: u32,
) -> Result<SkuState, SkuAdminError> {
    tokio::time::timeout(
        db.operation_bound(),
        upsert_unbounded(db, redis, sku_id, total, limit_per_user),
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
) -> Result<SkuState, SkuAdminError> {
    let mut conn = db.conn().await?;
    let mut tx = conn
        .start_transaction(ledger::tx_opts())
        .await
        .map_err(DbError::from)?;
    let (delta, available_mysql) = match sku::lock(&mut tx, sku_id).await? {
        None => {
            sku::insert(&mut tx, sku_id, total, limit_per_user).await?;
            (total, total)
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
            (delta, row.available_stock + delta)
        }
    };
    let loaded = redis
        .load_sku(
            sku_id,
            delta,
            available_mysql,
            u64::from(limit_per_user),
            total as u64,
        )
        .await?;
    let available_redis = match loaded {
        LoadOutcome::Loaded { available } => available,
        LoadOutcome::BelowReserved { available } => {
            return Err(SkuAdminError::BelowReserved {
                requested: total,
                reserved: total - available_mysql + (available_mysql - available),
            })
        }
    };
    tx.commit().await.map_err(DbError::from)?;
    Ok(SkuState {
        sku_id,
        total_stock: total,
        available_mysql,
        available_redis,
        limit_per_user,
    })
}
