//! Why a change of a SKU's stock or layout was refused or failed: what
//! creating and restocking (`sku_admin.rs`), an adjustment and the Redis
//! step of a stock movement (`stock_step.rs`) all answer.

use crate::db::DbError;
use crate::redis::RedisError;

#[derive(Debug, thiserror::Error)]
pub enum SkuAdminError {
    #[error("total_stock {requested} is below the {reserved} units already reserved")]
    BelowReserved { requested: i64, reserved: i64 },
    #[error("the bucket count cannot change while buyer state lives in Redis: {0}")]
    BucketsLocked(String),
    #[error("SKU {0} is not loaded into Redis; warm it up first")]
    NotLoaded(u64),
    /// A change of a sale that has opened (`SaleTerms::changed`): 409
    /// `SALE_OPEN`, nothing written.
    #[error("{0}")]
    SaleOpen(String),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
}
