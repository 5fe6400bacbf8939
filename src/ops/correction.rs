//! Corrections of Redis' count to MySQL's truth — a reconciler repair, a
//! warm-up that changed what Redis held — recorded as stock movements (kinds
//! `repair` and `warmup`) with their `stockd.sku.adjusted` event. MySQL's
//! total and available do not move (delta 0, so "total = Σ delta" still
//! holds); the movement keeps Redis' available before and after, so the
//! movements and the ledger explain every change of either store's count.
//!
//! Written after Redis was corrected, in a transaction of its own under the
//! SKU row lock. A failure here is logged by the caller and loses only the
//! record, never the correction.

use crate::clock::unix_ms;
use crate::db::movements::{self, MovementKind, NewMovement};
use crate::db::{event_outbox, ledger, sku, Db, DbError};
use crate::domain::SkuId;

/// Who a correction's movement names as its actor.
pub const RECONCILER: &str = "reconciler";
pub const WARMUP: &str = "warmup";

/// One correction of Redis' available.
pub struct Correction<'a> {
    pub sku_id: SkuId,
    pub kind: MovementKind,
    /// Redis' available before (`None`: Redis held nothing) and after.
    pub redis_before: Option<i64>,
    pub redis_after: i64,
    /// Why, in words (the verdict, `--force`).
    pub reason: &'a str,
    pub actor: &'a str,
}

/// Records `c` as a movement; returns its id (`None`: the SKU is gone).
pub async fn record(db: &Db, c: &Correction<'_>) -> Result<Option<u64>, DbError> {
    db.bounded(async {
        let mut conn = db.conn().await?;
        let mut tx = conn.start_transaction(ledger::tx_opts()).await?;
        let mut out = db.outgoing();
        let Some(row) = sku::lock_noted(&mut tx, c.sku_id, &mut out).await? else {
            return Ok(None);
        };
        let movement = NewMovement {
            sku_id: c.sku_id,
            kind: c.kind,
            delta: 0,
            total_before: row.total_stock,
            available_before: row.available_stock,
            reason: Some(c.reason),
            reference: None,
            actor: c.actor,
            adjustment_id: None,
            created_at_ms: unix_ms(),
            redis_available: Some((c.redis_before, c.redis_after)),
            redis_op: None,
            redis_pending: false,
        };
        let id = movements::insert(&mut tx, &movement).await?;
        movements::note(&mut out, &movement, id, row.low_stock_threshold);
        event_outbox::stage(&mut tx, out, movement.created_at_ms).await?;
        tx.commit().await?;
        Ok(Some(id))
    })
    .await
}
