//! The ledger rows a run's deductions of one SKU already hold, looked up by
//! request id under the SKU row lock: a single reservation's is a duplicate,
//! skipped and told again from its row (`apply.rs`); an order line's, when
//! the run looks its orders up (`apply_order.rs`, `OrderCheck::LookedUp`),
//! fails its order. One lookup for both: the same rows by the same key.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::INSERT_CHUNK_ROWS;
use crate::db::sql_text::SqlText;
use crate::db::DbError;
use crate::domain::{Deduction, SkuId};

/// A ledger row of a deduction being applied again.
pub(super) struct KnownRow {
    pub created_ms: u64,
    pub expires_ms: u64,
    pub user_id: u64,
    pub count: u32,
    pub status: String,
    pub reason: Option<String>,
    /// Moves of the deadline since the row was written (`extend`).
    pub extensions: u32,
    /// The available its first telling said (NULL before 0008).
    pub told_available: Option<i64>,
}

/// Ledger rows of `msgs` (all of SKU `sku_id`) already present, by request
/// id (the primary key).
pub(super) async fn existing_rows(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    msgs: &[&Deduction],
) -> Result<HashMap<String, KnownRow>, DbError> {
    type Raw = (
        String,
        u64,
        u64,
        u64,
        u32,
        String,
        Option<String>,
        u32,
        Option<i64>,
    );
    let mut found = HashMap::new();
    for chunk in msgs.chunks(INSERT_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "SELECT deduct_request_id, reserved_at_ms, expires_at_ms, user_id, deduct_count,
                    status, reason, extensions, told_available
             FROM stock_deduct_idempotent WHERE sku_id = ",
        );
        sql.int(sku_id.get())
            .raw(" AND deduct_request_id IN (")
            .request_ids(chunk.iter().map(|m| &m.request_id))
            .raw(")");
        let rows: Vec<Raw> = tx.query(sql.finish()).await?;
        found.extend(rows.into_iter().map(
            |(id, created_ms, expires_ms, user_id, count, status, reason, extensions, told)| {
                let known = KnownRow {
                    created_ms,
                    expires_ms,
                    user_id,
                    count,
                    status,
                    reason,
                    extensions,
                    told_available: told,
                };
                (id, known)
            },
        ));
    }
    Ok(found)
}
