//! Reads of ledger rows: one row, the live units of a SKU or its buyers, the
//! rows due for expiry or for a Redis mirror, and pages of recent rows.

use mysql_async::prelude::Queryable;
use mysql_async::{Params, Transaction};

use super::LedgerRow;
use crate::db::holds::Search;
use crate::db::DbError;
use crate::domain::{RequestId, ReservationStatus, SkuId, UserId};

type RawLedger = (
    u64,
    String,
    u64,
    u32,
    String,
    Option<String>,
    u64,
    u64,
    u8,
    Option<String>,
);

const LEDGER_COLUMNS: &str = "sku_id, deduct_request_id, user_id, deduct_count, status, reason,
    reserved_at_ms, expires_at_ms, redis_pending, client";

fn from_raw(raw: RawLedger) -> LedgerRow {
    LedgerRow {
        sku_id: SkuId::new(raw.0).expect("valid sku id in ledger"),
        request_id: RequestId::parse(&raw.1).expect("valid request id in ledger"),
        user_id: UserId::new(raw.2).expect("valid user id in ledger"),
        count: raw.3,
        status: ReservationStatus::parse(&raw.4).expect("valid status in ledger"),
        reason: raw.5,
        reserved_at_ms: raw.6,
        expires_at_ms: raw.7,
        redis_pending: raw.8 != 0,
        client: raw.9,
    }
}

/// The ledger rows of `SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent`
/// followed by `rest` (its `WHERE`, order and limit), with `params`.
async fn rows_where<Q, P>(q: &mut Q, rest: &str, params: P) -> Result<Vec<LedgerRow>, DbError>
where
    Q: Queryable,
    P: Into<Params> + Send,
{
    let raw: Vec<RawLedger> = q
        .exec(
            format!("SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent {rest}"),
            params,
        )
        .await?;
    Ok(raw.into_iter().map(from_raw).collect())
}

/// One ledger row, without locking.
pub async fn find<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Result<Option<LedgerRow>, DbError> {
    find_row(q, sku_id, request_id, "").await
}

/// The row of `(sku_id, request_id)`, the statement ending in `tail`.
async fn find_row<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    request_id: &RequestId,
    tail: &str,
) -> Result<Option<LedgerRow>, DbError> {
    // The primary key: one row at most.
    let rest = format!("WHERE sku_id = ? AND deduct_request_id = ?{tail}");
    let rows = rows_where(q, &rest, (sku_id.get(), request_id.as_str())).await?;
    Ok(rows.into_iter().next())
}

/// Whether the ledger row is a line of an order (`order_line = 1`): such a
/// row moves only with its whole order, never as a single reservation.
pub async fn is_order_line<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Result<bool, DbError> {
    let order_line: Option<u8> = q
        .exec_first(
            "SELECT order_line FROM stock_deduct_idempotent
             WHERE sku_id = ? AND deduct_request_id = ?",
            (sku_id.get(), request_id.as_str()),
        )
        .await?;
    Ok(order_line == Some(1))
}

/// One ledger row, locked for a transition (take the SKU lock first).
pub async fn find_for_update(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Result<Option<LedgerRow>, DbError> {
    find_row(tx, sku_id, request_id, " FOR UPDATE").await
}

/// The rows of one SKU's `ids` that are single reservations (order lines
/// left out), without locking: a batch's first read (`lifecycle::expire_many`).
pub async fn find_many<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    ids: &[RequestId],
) -> Result<Vec<LedgerRow>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let raw: Vec<RawLedger> = q.query(rows_of_sql(sku_id, ids, "")).await?;
    Ok(raw.into_iter().map(from_raw).collect())
}

/// [`find_many`], locked for a batch of transitions (take the SKU lock
/// first), in request-id order so two batches lock in the same order.
pub async fn find_many_for_update(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    ids: &[RequestId],
) -> Result<Vec<LedgerRow>, DbError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = rows_of_sql(sku_id, ids, " ORDER BY deduct_request_id FOR UPDATE");
    let raw: Vec<RawLedger> = tx.query(sql).await?;
    Ok(raw.into_iter().map(from_raw).collect())
}

/// The SELECT of [`find_many`] as text (`db::sql_text`: one statement
/// whatever the batch's size).
fn rows_of_sql(sku_id: SkuId, ids: &[RequestId], tail: &str) -> String {
    let mut sql = crate::db::sql_text::SqlText::new(&format!(
        "SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent WHERE sku_id = "
    ));
    sql.int(sku_id.get())
        .raw(" AND order_line = 0 AND deduct_request_id IN (")
        .request_ids(ids)
        .raw(")")
        .raw(tail);
    sql.finish()
}

/// Sum of live (RESERVED + CONFIRMED) units of one SKU.
pub async fn live_units<Q: Queryable>(q: &mut Q, sku_id: SkuId) -> Result<i64, DbError> {
    let sum: Option<Option<i64>> = q
        .exec_first(
            "SELECT CAST(SUM(deduct_count) AS SIGNED) FROM stock_deduct_idempotent
             WHERE sku_id = ? AND status IN ('RESERVED', 'CONFIRMED')",
            (sku_id.get(),),
        )
        .await?;
    Ok(sum.flatten().unwrap_or(0))
}

/// Expired `RESERVED` single reservations of one SKU (the sweep's search,
/// `db::holds`), locked; rows another closer holds are skipped (`SKIP
/// LOCKED`), so concurrent sweeps split the work.
pub async fn expired_for_update(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    cutoff_ms: u64,
    limit: usize,
) -> Result<Vec<LedgerRow>, DbError> {
    let (due, params) = Search::Singles(sku_id).due(cutoff_ms);
    let rest = format!("WHERE {due} ORDER BY expires_at_ms LIMIT {limit} FOR UPDATE SKIP LOCKED");
    rows_where(tx, &rest, params).await
}

/// Decided rows whose Redis mirror has not succeeded, oldest first. The finish
/// time is compared so a mirror its own request is still doing is left alone.
pub async fn pending_mirrors<Q: Queryable>(
    q: &mut Q,
    finished_before_ms: u64,
    limit: usize,
) -> Result<Vec<LedgerRow>, DbError> {
    let rest = format!(
        "WHERE redis_pending = 1 AND (finished_at_ms IS NULL OR finished_at_ms < ?)
         LIMIT {limit}"
    );
    rows_where(q, &rest, (finished_before_ms,)).await
}

/// One page of a SKU's ledger rows reserved after `reserved_after_ms`, in
/// request-id order after `after_id` (keyset pagination on the primary key).
pub async fn page_since<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    reserved_after_ms: u64,
    after_id: &str,
    limit: usize,
) -> Result<Vec<LedgerRow>, DbError> {
    let rest = format!(
        "WHERE sku_id = ? AND deduct_request_id > ? AND reserved_at_ms > ?
         ORDER BY deduct_request_id LIMIT {limit}"
    );
    rows_where(q, &rest, (sku_id.get(), after_id, reserved_after_ms)).await
}

/// Request ids of a SKU's live rows reserved after `reserved_after_ms`, at
/// most `limit` (the reconciler compares them with Redis' records).
pub async fn live_ids_since<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    reserved_after_ms: u64,
    limit: usize,
) -> Result<Vec<String>, DbError> {
    let ids = q
        .exec(
            format!(
                "SELECT deduct_request_id FROM stock_deduct_idempotent
                 WHERE sku_id = ? AND status IN ('RESERVED', 'CONFIRMED') AND reserved_at_ms > ?
                 LIMIT {limit}"
            ),
            (sku_id.get(), reserved_after_ms),
        )
        .await?;
    Ok(ids)
}

/// Buyers of a SKU holding more live units than `limit` (contract §10.6).
pub async fn buyers_over_limit<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    limit: u32,
) -> Result<Vec<(u64, i64)>, DbError> {
    let over = q
        .exec(
            "SELECT user_id, CAST(SUM(deduct_count) AS SIGNED) AS held FROM stock_deduct_idempotent
             WHERE sku_id = ? AND status IN ('RESERVED', 'CONFIRMED')
             GROUP BY user_id HAVING held > ? LIMIT 100",
            (sku_id.get(), limit),
        )
        .await?;
    Ok(over)
}
