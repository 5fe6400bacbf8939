//! The Redis half of a stock movement as MySQL records it (`redis_op`,
//! `redis_pending` of `stock_movements`, migration 0009): which committed
//! restocks still owe Redis their units, and whether the cut a Redis step
//! took was committed. Why the two signs differ: `ops/stock_step.rs`.

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::DbError;
use crate::domain::SkuId;

/// The kinds that move total and available (corrections move Redis only).
/// They are all written under the SKU row lock, so one SKU's ids grow in
/// commit order: a snapshot holding one holds every lower one.
const STOCK_KINDS: &str = "('create', 'restock', 'adjustment')";

/// A committed restock (or creation) whose Redis step is not done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingStep {
    pub movement_id: u64,
    pub sku_id: SkuId,
    /// `create` may load a SKU Redis does not hold; the others may not.
    pub create: bool,
    pub delta: i64,
    /// MySQL's available right after the movement (a creation's first stock).
    pub available_after: i64,
    pub total_after: i64,
    /// The step's id: its Redis marker makes a second run a no-op.
    pub redis_op: String,
}

type Raw = (u64, u64, String, i64, i64, i64, Option<String>);

const COLUMNS: &str = "id, sku_id, kind, delta, available_after, total_after, redis_op";

fn from_raw(raw: Raw) -> Option<PendingStep> {
    let (movement_id, sku, kind, delta, available_after, total_after, op) = raw;
    Some(PendingStep {
        movement_id,
        sku_id: SkuId::new(sku).ok()?,
        create: kind == "create",
        delta,
        available_after,
        total_after,
        redis_op: op?,
    })
}

/// Pending steps of movements created at or before `before_ms`, oldest
/// first, at most `limit`.
pub async fn pending<Q: Queryable>(
    q: &mut Q,
    before_ms: u64,
    limit: usize,
) -> Result<Vec<PendingStep>, DbError> {
    let rows: Vec<Raw> = q
        .exec(
            format!(
                "SELECT {COLUMNS} FROM stock_movements
                 WHERE redis_pending = 1 AND created_at_ms <= ? ORDER BY id LIMIT ?"
            ),
            (before_ms, limit as u64),
        )
        .await?;
    Ok(rows.into_iter().filter_map(from_raw).collect())
}

/// The pending step of movement `id`, if its Redis step is not done.
pub async fn pending_of<Q: Queryable>(q: &mut Q, id: u64) -> Result<Option<PendingStep>, DbError> {
    let row: Option<Raw> = q
        .exec_first(
            format!("SELECT {COLUMNS} FROM stock_movements WHERE id = ? AND redis_pending = 1"),
            (id,),
        )
        .await?;
    Ok(row.and_then(from_raw))
}

/// Whether any committed restock of `sku` still owes Redis its units.
pub async fn any_pending<Q: Queryable>(q: &mut Q, sku: SkuId) -> Result<bool, DbError> {
    let row: Option<u64> = q
        .exec_first(
            "SELECT id FROM stock_movements WHERE redis_pending = 1 AND sku_id = ? LIMIT 1",
            (sku.get(),),
        )
        .await?;
    Ok(row.is_some())
}

/// Marks the Redis step of movement `id` done.
pub async fn mark_done<Q: Queryable>(q: &mut Q, id: u64) -> Result<(), DbError> {
    q.exec_drop(
        "UPDATE stock_movements SET redis_pending = 0 WHERE id = ?",
        (id,),
    )
    .await?;
    Ok(())
}

/// The movement of `sku` committed under the Redis step `op`, if any. A
/// locking read: under the SKU row lock it sees the latest commit, not the
/// transaction's snapshot.
pub async fn committed(
    tx: &mut Transaction<'_>,
    sku: SkuId,
    op: &str,
) -> Result<Option<u64>, DbError> {
    let row: Option<u64> = tx
        .exec_first(
            "SELECT id FROM stock_movements WHERE sku_id = ? AND redis_op = ? LOCK IN SHARE MODE",
            (sku.get(), op),
        )
        .await?;
    Ok(row)
}

/// The id of the SKU's last movement of stock in the caller's snapshot (0:
/// none): MySQL's available read in the same snapshot counts it and every
/// one before it.
pub async fn moved_through<Q: Queryable>(q: &mut Q, sku: SkuId) -> Result<u64, DbError> {
    // Newest first along `ix_stock_movements_sku`: stops at the first one.
    let row: Option<u64> = q
        .exec_first(
            format!(
                "SELECT id FROM stock_movements WHERE sku_id = ? AND kind IN {STOCK_KINDS}
                 ORDER BY id DESC LIMIT 1"
            ),
            (sku.get(),),
        )
        .await?;
    Ok(row.unwrap_or(0))
}
