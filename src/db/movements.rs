//! The `stock_movements` table: one row per change of a SKU's stock outside
//! the reservation lifecycle (creation, restock, adjustment), written in the
//! transaction that makes the change, so a movement exists exactly when its
//! change was committed. Rows are never updated or deleted; `id` orders them
//! and pages through them.

use mysql_async::prelude::Queryable;
use mysql_async::{Row, Transaction};

use super::DbError;
use crate::domain::SkuId;
use crate::events::{Event, EventType, Outgoing};
use serde_json::json;

/// Why a SKU's stock moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MovementKind {
    /// The SKU was created (`PUT /v1/admin/skus/{id}` of a new id).
    Create,
    /// `PUT /v1/admin/skus/{id}` set a new total.
    Restock,
    /// `POST /v1/admin/skus/{id}/adjustments`.
    Adjustment,
    /// The reconciler brought Redis' available to MySQL's truth.
    Repair,
    /// A warm-up rebuilt Redis from MySQL and changed what Redis held.
    Warmup,
}

impl MovementKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Restock => "restock",
            Self::Adjustment => "adjustment",
            Self::Repair => "repair",
            Self::Warmup => "warmup",
        }
    }
}

/// A movement to record. `delta` moves total and available alike.
#[derive(Debug, Clone)]
pub struct NewMovement<'a> {
    pub sku_id: SkuId,
    pub kind: MovementKind,
    pub delta: i64,
    pub total_before: i64,
    pub available_before: i64,
    pub reason: Option<&'a str>,
    pub reference: Option<&'a str>,
    pub actor: &'a str,
    pub adjustment_id: Option<&'a str>,
    pub created_at_ms: u64,
    /// A correction's Redis available before (`None`: Redis held nothing)
    /// and after; `None` for the kinds that move MySQL.
    pub redis_available: Option<(Option<i64>, i64)>,
    /// The kinds that move stock: the id of their Redis step, whose marker
    /// makes it idempotent (`ops/stock_step.rs`).
    pub redis_op: Option<&'a str>,
    /// A restock committed before its Redis step: the sweep finishes it.
    pub redis_pending: bool,
}

impl NewMovement<'_> {
    /// The row as [`insert`] wrote it under `id`.
    pub fn recorded(&self, id: u64) -> Movement {
        Movement {
            id,
            sku_id: self.sku_id.get(),
            kind: self.kind.as_str().to_string(),
            delta: self.delta,
            total_before: self.total_before,
            total_after: self.total_before + self.delta,
            available_before: self.available_before,
            available_after: self.available_before + self.delta,
            reason: self.reason.map(str::to_string),
            reference: self.reference.map(str::to_string),
            actor: self.actor.to_string(),
            adjustment_id: self.adjustment_id.map(str::to_string),
            created_at_ms: self.created_at_ms,
            redis_available_before: self.redis_available.and_then(|r| r.0),
            redis_available_after: self.redis_available.map(|r| r.1),
        }
    }
}

/// A recorded movement, as the movements endpoint lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Movement {
    /// Position in the SKU's history; pass the last one seen as `after`.
    pub id: u64,
    pub sku_id: u64,
    /// `create`, `restock`, `adjustment` (MySQL and Redis moved by `delta`),
    /// or `repair`, `warmup` (Redis corrected to MySQL's count: `delta` 0).
    pub kind: String,
    /// Units added (positive) or removed (negative), from total and available alike.
    pub delta: i64,
    pub total_before: i64,
    pub total_after: i64,
    /// MySQL's available before and after (what the ledger has not promised).
    pub available_before: i64,
    pub available_after: i64,
    pub reason: Option<String>,
    pub reference: Option<String>,
    /// Who made the change: a client's name (`auth.clients`) or `admin-token`.
    pub actor: String,
    pub adjustment_id: Option<String>,
    /// When it was committed, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// `repair` and `warmup`: Redis' available before (null: Redis held
    /// nothing) and after the correction; null for the other kinds.
    pub redis_available_before: Option<i64>,
    pub redis_available_after: Option<i64>,
}

const COLUMNS: &str = "id, sku_id, kind, delta, total_before, total_after, available_before, \
     available_after, reason, reference, actor, adjustment_id, created_at_ms, \
     redis_available_before, redis_available_after";

fn from_row(mut row: Row) -> Movement {
    Movement {
        id: row.take(0).unwrap_or_default(),
        sku_id: row.take(1).unwrap_or_default(),
        kind: row.take(2).unwrap_or_default(),
        delta: row.take(3).unwrap_or_default(),
        total_before: row.take(4).unwrap_or_default(),
        total_after: row.take(5).unwrap_or_default(),
        available_before: row.take(6).unwrap_or_default(),
        available_after: row.take(7).unwrap_or_default(),
        reason: row.take(8).unwrap_or_default(),
        reference: row.take(9).unwrap_or_default(),
        actor: row.take(10).unwrap_or_default(),
        adjustment_id: row.take(11).unwrap_or_default(),
        created_at_ms: row.take(12).unwrap_or_default(),
        redis_available_before: row.take(13).unwrap_or_default(),
        redis_available_after: row.take(14).unwrap_or_default(),
    }
}

/// Notes the `stockd.sku.adjusted` event of movement `id` in `out`, and the
/// stock it moved, so a restock of a sold-out SKU is also `back_in_stock` (a
/// creation is not: there was no stock to come back).
pub fn note(out: &mut Outgoing, m: &NewMovement<'_>, id: u64, low_threshold: Option<u32>) {
    let recorded = m.recorded(id);
    if m.kind == MovementKind::Create {
        out.locked(
            m.sku_id,
            recorded.total_after,
            recorded.available_after,
            low_threshold,
        );
    } else {
        out.locked(m.sku_id, m.total_before, m.available_before, low_threshold);
        out.moved(m.sku_id, m.delta, m.delta);
    }
    if !out.wants(EventType::Adjusted) {
        return;
    }
    let data = json!({
        "sku_id": m.sku_id.get(),
        "movement_id": id,
        "kind": m.kind.as_str(),
        "delta": m.delta,
        "total_before": recorded.total_before,
        "total_after": recorded.total_after,
        "available_before": recorded.available_before,
        "available_after": recorded.available_after,
        "reason": m.reason.unwrap_or(m.kind.as_str()),
        "reference": m.reference,
        "actor": m.actor,
        "adjustment_id": m.adjustment_id,
        "redis_available_before": recorded.redis_available_before,
        "redis_available_after": recorded.redis_available_after,
    });
    out.push(Event::adjusted(m.sku_id, id, data, m.created_at_ms));
}

/// Records `m` in the caller's transaction; returns the new row's id.
pub async fn insert(tx: &mut Transaction<'_>, m: &NewMovement<'_>) -> Result<u64, DbError> {
    let redis_before = m.redis_available.and_then(|r| r.0);
    let redis_after = m.redis_available.map(|r| r.1);
    let params: Vec<mysql_async::Value> = vec![
        m.sku_id.get().into(),
        m.kind.as_str().into(),
        m.delta.into(),
        m.total_before.into(),
        (m.total_before + m.delta).into(),
        m.available_before.into(),
        (m.available_before + m.delta).into(),
        m.reason.into(),
        m.reference.into(),
        m.actor.into(),
        m.adjustment_id.into(),
        m.created_at_ms.into(),
        redis_before.into(),
        redis_after.into(),
        m.redis_op.into(),
        u8::from(m.redis_pending).into(),
    ];
    tx.exec_drop(
        "INSERT INTO stock_movements (sku_id, kind, delta, total_before, total_after,
           available_before, available_after, reason, reference, actor, adjustment_id,
           created_at_ms, redis_available_before, redis_available_after, redis_op,
           redis_pending)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    )
    .await?;
    Ok(tx.last_insert_id().unwrap_or_default())
}

/// The movement recorded under `adjustment_id` for the SKU, if any.
pub async fn by_adjustment_id<Q: Queryable>(
    q: &mut Q,
    sku: SkuId,
    adjustment_id: &str,
) -> Result<Option<Movement>, DbError> {
    let row: Option<Row> = q
        .exec_first(
            format!("SELECT {COLUMNS} FROM stock_movements WHERE sku_id = ? AND adjustment_id = ?"),
            (sku.get(), adjustment_id),
        )
        .await?;
    Ok(row.map(from_row))
}

/// Up to `limit` movements of the SKU with an id above `after`, oldest first.
pub async fn page<Q: Queryable>(
    q: &mut Q,
    sku: SkuId,
    after: u64,
    limit: u32,
) -> Result<Vec<Movement>, DbError> {
    let rows: Vec<Row> = q
        .exec(
            format!(
                "SELECT {COLUMNS} FROM stock_movements WHERE sku_id = ? AND id > ?
                 ORDER BY id LIMIT ?"
            ),
            (sku.get(), after, limit),
        )
        .await?;
    Ok(rows.into_iter().map(from_row).collect())
}
