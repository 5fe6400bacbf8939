//! Read-only queries of the operator console (`GET /v1/admin/overview`): the
//! first SKUs of `sku_stock`, their ledger rows counted by status, and the
//! orders counted by status. Never locks; called at most about once a second
//! per process (the overview cache).

use std::collections::HashMap;

use mysql_async::prelude::Queryable;

use super::sku::SkuRow;
use super::{Db, DbError};
use crate::domain::SkuId;

/// Rows by status: a SKU's ledger rows (reservations, not units), or the
/// orders (whole orders, not lines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatusCounts {
    pub reserved: u64,
    pub confirmed: u64,
    pub released: u64,
    pub rejected: u64,
}

impl StatusCounts {
    /// Takes `n` rows of `status` (another status is not counted).
    fn set(&mut self, status: &str, n: u64) {
        match status {
            "RESERVED" => self.reserved = n,
            "CONFIRMED" => self.confirmed = n,
            "RELEASED" => self.released = n,
            "REJECTED" => self.rejected = n,
            _ => {}
        }
    }
}

/// The first `limit` SKUs by id, plus whether more exist.
pub async fn first_skus(db: &Db, limit: usize) -> Result<(Vec<SkuRow>, bool), DbError> {
    let raw: Vec<(u64, i64, i64, u32, u16)> = db
        .bounded(async {
            let mut conn = db.conn().await?;
            Ok(conn
                .exec(
                    "SELECT sku_id, total_stock, available_stock, limit_per_user, buckets \
                     FROM sku_stock ORDER BY sku_id LIMIT ?",
                    (limit as u64 + 1,),
                )
                .await?)
        })
        .await?;
    let more = raw.len() > limit;
    let rows = raw
        .into_iter()
        .take(limit)
        .filter_map(
            |(id, total_stock, available_stock, limit_per_user, buckets)| {
                Some(SkuRow {
                    sku_id: SkuId::new(id).ok()?,
                    total_stock,
                    available_stock,
                    limit_per_user,
                    buckets,
                    low_stock_threshold: None,
                })
            },
        )
        .collect();
    Ok((rows, more))
}

/// Ledger rows by status of the SKUs in `[first, last]` (a primary-key range read).
pub async fn status_counts(
    db: &Db,
    first: SkuId,
    last: SkuId,
) -> Result<HashMap<u64, StatusCounts>, DbError> {
    let raw: Vec<(u64, String, u64)> = db
        .bounded(async {
            let mut conn = db.conn().await?;
            Ok(conn
                .exec(
                    "SELECT sku_id, status, COUNT(*) FROM stock_deduct_idempotent \
                     WHERE sku_id BETWEEN ? AND ? GROUP BY sku_id, status",
                    (first.get(), last.get()),
                )
                .await?)
        })
        .await?;
    let mut counts: HashMap<u64, StatusCounts> = HashMap::new();
    for (sku, status, n) in raw {
        counts.entry(sku).or_default().set(&status, n);
    }
    Ok(counts)
}

/// Every order by status: a scan of `idx_orders_status_expiry` (index
/// only, no row is read), so it grows with the orders kept: 0.10–0.21 s
/// for a million orders on this VM; past the overview's part timeout
/// (0.8 s) the console shows the counts as unknown.
pub async fn order_counts(db: &Db) -> Result<StatusCounts, DbError> {
    let raw: Vec<(String, u64)> = db
        .bounded(async {
            let mut conn = db.conn().await?;
            Ok(conn
                .query("SELECT status, COUNT(*) FROM orders GROUP BY status")
                .await?)
        })
        .await?;
    let mut counts = StatusCounts::default();
    for (status, n) in raw {
        counts.set(&status, n);
    }
    Ok(counts)
}
