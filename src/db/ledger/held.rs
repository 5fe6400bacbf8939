//! The live units each buyer holds of a SKU, read under the SKU row lock:
//! the quota a single reservation and an order line are both fitted
//! against (`apply.rs`, `apply_order.rs`), so it is read one way for both;
//! and the units a fit admitted, taken from the locked SKU row.

use std::collections::{HashMap, HashSet};

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::INSERT_CHUNK_ROWS;
use crate::db::sql_text::SqlText;
use crate::db::{sku, DbError};
use crate::domain::{Deduction, SkuId};

/// Live (RESERVED + CONFIRMED) units each buyer of `msgs` holds of the SKU
/// (index `idx_sku_user_status`; the SKU row lock keeps it stable).
pub(super) async fn buyers_live_units(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    msgs: &[&Deduction],
) -> Result<HashMap<u64, i64>, DbError> {
    let users: Vec<u64> = msgs
        .iter()
        .map(|m| m.user_id.get())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let mut held = HashMap::with_capacity(users.len());
    for chunk in users.chunks(INSERT_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "SELECT user_id, CAST(SUM(deduct_count) AS SIGNED) FROM stock_deduct_idempotent
             WHERE sku_id = ",
        );
        sql.int(sku_id.get())
            .raw(" AND user_id IN (")
            .list(chunk, ",", |s, u| {
                s.int(*u);
            })
            .raw(") AND status IN ('RESERVED', 'CONFIRMED') GROUP BY user_id");
        let rows: Vec<(u64, i64)> = tx.query(sql.finish()).await?;
        held.extend(rows);
    }
    Ok(held)
}

/// Takes the `units` a fit under the SKU row lock admitted (none: no
/// statement). The fit read the locked row, so the guard cannot refuse.
pub(super) async fn take_fitted(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    units: i64,
) -> Result<(), DbError> {
    if units > 0 {
        let took = sku::take(tx, sku_id, units).await?;
        assert!(
            took,
            "the SKU row is locked and the fit was computed under the lock"
        );
    }
    Ok(())
}
