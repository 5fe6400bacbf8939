//! The `sku_stock` table: total and available stock per SKU.

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::DbError;
use crate::domain::SkuId;
use crate::events::Outgoing;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuRow {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub available_stock: i64,
    pub limit_per_user: u32,
    /// Stock buckets in Redis (`redis/buckets`; 1 = not split).
    pub buckets: u16,
    /// `stockd.sku.low_stock` is published when available falls to or below it.
    pub low_stock_threshold: Option<u32>,
}

impl SkuRow {
    /// Units promised to buyers (live ledger rows), by conservation.
    pub fn reserved(&self) -> i64 {
        self.total_stock - self.available_stock
    }
}

type RawRow = (u64, i64, i64, u32, u16, Option<u32>);

fn from_raw(raw: RawRow) -> SkuRow {
    SkuRow {
        sku_id: SkuId::new(raw.0).expect("sku ids in the table are valid"),
        total_stock: raw.1,
        available_stock: raw.2,
        limit_per_user: raw.3,
        buckets: raw.4,
        low_stock_threshold: raw.5,
    }
}

const COLUMNS: &str =
    "sku_id, total_stock, available_stock, limit_per_user, buckets, low_stock_threshold";

/// Reads one SKU without locking.
pub async fn get<Q: Queryable>(q: &mut Q, sku: SkuId) -> Result<Option<SkuRow>, DbError> {
    let raw: Option<RawRow> = q
        .exec_first(
            format!("SELECT {COLUMNS} FROM sku_stock WHERE sku_id = ?"),
            (sku.get(),),
        )
        .await?;
    Ok(raw.map(from_raw))
}

/// Reads and locks one SKU row: the lock every ledger writer of this SKU takes first.
pub async fn lock(tx: &mut Transaction<'_>, sku: SkuId) -> Result<Option<SkuRow>, DbError> {
    let raw: Option<RawRow> = tx
        .exec_first(
            format!("SELECT {COLUMNS} FROM sku_stock WHERE sku_id = ? FOR UPDATE"),
            (sku.get(),),
        )
        .await?;
    Ok(raw.map(from_raw))
}

/// [`lock`], noting the SKU's stock in `out` so the transaction's events
/// know where its available started (`events::Outgoing`).
pub async fn lock_noted(
    tx: &mut Transaction<'_>,
    sku: SkuId,
    out: &mut Outgoing,
) -> Result<Option<SkuRow>, DbError> {
    let row = lock(tx, sku).await?;
    if let Some(r) = &row {
        out.locked(sku, r.total_stock, r.available_stock, r.low_stock_threshold);
    }
    Ok(row)
}

/// Sets or clears the low-stock threshold.
pub async fn set_low_stock_threshold(
    tx: &mut Transaction<'_>,
    sku: SkuId,
    threshold: Option<u32>,
) -> Result<(), DbError> {
    tx.exec_drop(
        "UPDATE sku_stock SET low_stock_threshold = ? WHERE sku_id = ?",
        (threshold, sku.get()),
    )
    .await?;
    Ok(())
}

pub async fn insert(
    tx: &mut Transaction<'_>,
    sku: SkuId,
    total: i64,
    limit_per_user: u32,
    buckets: u16,
) -> Result<(), DbError> {
    tx.exec_drop(
        "INSERT INTO sku_stock (sku_id, total_stock, available_stock, limit_per_user, buckets)
         VALUES (?, ?, ?, ?, ?)",
        (sku.get(), total, total, limit_per_user, buckets),
    )
    .await?;
    Ok(())
}

/// Records how many Redis buckets the SKU is split into.
pub async fn set_buckets(
    tx: &mut Transaction<'_>,
    sku: SkuId,
    buckets: u16,
) -> Result<(), DbError> {
    tx.exec_drop(
        "UPDATE sku_stock SET buckets = ? WHERE sku_id = ?",
        (buckets, sku.get()),
    )
    .await?;
    Ok(())
}

/// Sets a new total and limit; `available` moves by the same delta as `total`.
pub async fn restock(
    tx: &mut Transaction<'_>,
    sku: SkuId,
    total_delta: i64,
    limit_per_user: u32,
) -> Result<(), DbError> {
    tx.exec_drop(
        "UPDATE sku_stock SET total_stock = total_stock + ?, available_stock = available_stock + ?,
                limit_per_user = ?, version = version + 1
         WHERE sku_id = ?",
        (total_delta, total_delta, limit_per_user, sku.get()),
    )
    .await?;
    Ok(())
}

/// Takes `units` from available, only if that many are available. Returns
/// whether the row changed (the `WHERE available_stock >= ?` guard of contract §4).
pub async fn take(tx: &mut Transaction<'_>, sku: SkuId, units: i64) -> Result<bool, DbError> {
    tx.exec_drop(
        "UPDATE sku_stock SET available_stock = available_stock - ?, version = version + 1
         WHERE sku_id = ? AND available_stock >= ?",
        (units, sku.get(), units),
    )
    .await?;
    Ok(tx.affected_rows() == 1)
}

/// Gives `units` back to available (a release).
pub async fn give_back(tx: &mut Transaction<'_>, sku: SkuId, units: i64) -> Result<(), DbError> {
    tx.exec_drop(
        "UPDATE sku_stock SET available_stock = available_stock + ?, version = version + 1
         WHERE sku_id = ? AND available_stock + ? <= total_stock",
        (units, sku.get(), units),
    )
    .await?;
    assert_eq!(
        tx.affected_rows(),
        1,
        "a release can never exceed total stock"
    );
    Ok(())
}

/// Every SKU id, ascending (reconciliation and `warmup --all`).
pub async fn all_ids(db: &super::Db) -> Result<Vec<SkuId>, DbError> {
    let ids: Vec<u64> = db
        .bounded(async {
            let mut conn = db.conn().await?;
            Ok(conn
                .query("SELECT sku_id FROM sku_stock ORDER BY sku_id")
                .await?)
        })
        .await?;
    Ok(ids
        .into_iter()
        .filter_map(|id| SkuId::new(id).ok())
        .collect())
}
