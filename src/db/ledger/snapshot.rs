//! Read-only ledger lookups shared by the reconciler's observation and the
//! invariant check (`stockd audit`): the snapshot both read in, and the ledger
//! status of a set of request ids as the in-flight arithmetic counts it.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, IsolationLevel, Transaction, TxOpts};

use crate::db::sql_text::SqlText;
use crate::db::{ledger, DbError};
use crate::domain::{RequestId, ReservationStatus, SkuId};

/// Ledger ids looked up per query.
const LOOKUP_CHUNK: usize = 500;

/// Starts a read-only transaction on `conn` that sees one consistent
/// snapshot: every read of the audit and of the comparison of the stores
/// begins here.
pub async fn begin_snapshot(conn: &mut Conn) -> Result<Transaction<'_>, DbError> {
    let mut opts = TxOpts::default();
    opts.with_consistent_snapshot(true)
        .with_isolation_level(IsolationLevel::RepeatableRead)
        .with_readonly(true);
    Ok(conn.start_transaction(opts).await?)
}

/// Ledger status of each of `ids` that has a row (any status).
pub async fn ledger_statuses<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    ids: &[&str],
) -> Result<HashMap<String, ReservationStatus>, DbError> {
    let mut out = HashMap::with_capacity(ids.len());
    // Only a valid request id can have a ledger row; the others are skipped
    // here, and the valid ones render safely as SQL text (`sql_text`).
    let ids: Vec<RequestId> = ids
        .iter()
        .filter_map(|id| RequestId::parse(id).ok())
        .collect();
    for chunk in ids.chunks(LOOKUP_CHUNK) {
        let mut sql = SqlText::new(
            "SELECT deduct_request_id, status, reason FROM stock_deduct_idempotent
             WHERE sku_id = ",
        );
        sql.int(sku_id.get())
            .raw(" AND deduct_request_id IN (")
            .request_ids(chunk)
            .raw(")");
        let rows: Vec<(String, String, Option<String>)> = q.query(sql.finish()).await?;
        for (id, status, why) in rows {
            let Some(mut s) = ReservationStatus::parse(&status) else {
                continue;
            };
            // A rejection that leaves the unit in MySQL's stock is, for the
            // stock in flight, a release: Redis will give the unit back.
            if s == ReservationStatus::Rejected
                && ledger::reason::rejection_returns_stock(why.as_deref())
            {
                s = ReservationStatus::Released;
            }
            out.insert(id, s);
        }
    }
    Ok(out)
}
