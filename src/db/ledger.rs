//! The `stock_deduct_idempotent` ledger and the consumer's batched apply (SPEC §4).
//!
//! One transaction per batch. Per SKU, in ascending id order (a fixed lock order
//! rules out deadlocks between consumers): lock the SKU row, skip the request ids
//! already in the ledger, fit the rest into `available_stock` (in reservation
//! order), take their sum with the `available_stock >= ?` guard, and insert the
//! rows — fitting ones `RESERVED`, the others `REJECTED`. MySQL stock can therefore
//! never go negative, even when Redis admitted more than exists (after a Redis
//! failover lost deductions).

use std::collections::{BTreeMap, HashSet};

use mysql_async::prelude::Queryable;
use mysql_async::{IsolationLevel, Params, Transaction, TxOpts, Value};

use super::{sku, Db, DbError};
use crate::domain::{RequestId, ReservationStatus, SkuId};
use crate::mq::DeductionMessage;

/// Rows per multi-row INSERT: 8 placeholders each, far below MySQL's 65,535.
const INSERT_CHUNK_ROWS: usize = 500;

/// Why a row was rejected or released; stored in `reason`.
pub mod reason {
    /// MySQL could not cover the deduction: Redis admitted more than exists.
    pub const OVER_ADMITTED: &str = "OVER_ADMITTED";
    /// The SKU does not exist in MySQL.
    pub const UNKNOWN_SKU: &str = "UNKNOWN_SKU";
    pub const CANCELLED: &str = "CANCELLED";
    pub const EXPIRED: &str = "EXPIRED";
}

/// What one batch did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchReport {
    /// New rows inserted as `RESERVED` (stock taken).
    pub applied: usize,
    /// Deliveries whose `(sku_id, request_id)` was already in the ledger.
    pub duplicates: usize,
    /// New rows inserted as `REJECTED`, with the reason.
    pub rejected: Vec<(DeductionMessage, &'static str)>,
}

/// A ledger row as the lifecycle and the API read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    pub sku_id: SkuId,
    pub request_id: RequestId,
    pub user_id: u64,
    pub count: u32,
    pub status: ReservationStatus,
    pub reason: Option<String>,
    pub reserved_at_ms: u64,
    pub expires_at_ms: u64,
    pub redis_pending: bool,
}

impl LedgerRow {
    pub fn to_reservation(&self) -> crate::domain::Reservation {
        crate::domain::Reservation {
            request_id: self.request_id.clone(),
            sku_id: self.sku_id,
            user_id: crate::domain::UserId::new(self.user_id).expect("valid user id in ledger"),
            count: self.count,
            status: self.status,
            created_at_ms: self.reserved_at_ms,
            expires_at_ms: self.expires_at_ms,
        }
    }
}

/// Read-committed: with the SKU row lock serializing ledger writers, every read
/// after the lock sees the latest committed rows; no gap locks are needed.
pub fn tx_opts() -> TxOpts {
    let mut opts = TxOpts::default();
    opts.with_isolation_level(IsolationLevel::ReadCommitted);
    opts
}

/// Applies a batch, retrying the whole transaction on deadlock or lock timeout.
pub async fn apply_batch(
    db: &Db,
    batch: &[DeductionMessage],
    retries: u32,
) -> Result<BatchReport, DbError> {
    let mut attempt = 0;
    loop {
        match apply_batch_once(db, batch).await {
            Err(err) if (err.is_retryable() || is_duplicate(&err)) && attempt < retries => {
                attempt += 1;
                tracing::warn!(error = %err, attempt, "batch.retry: transaction retried");
            }
            other => return other,
        }
    }
}

fn is_duplicate(err: &DbError) -> bool {
    err.server_code() == Some(super::codes::ER_DUP_ENTRY)
}

async fn apply_batch_once(db: &Db, batch: &[DeductionMessage]) -> Result<BatchReport, DbError> {
    let mut by_sku: BTreeMap<SkuId, Vec<&DeductionMessage>> = BTreeMap::new();
    for msg in batch {
        by_sku.entry(msg.sku_id).or_default().push(msg);
    }
    let mut report = BatchReport::default();
    let mut conn = db.conn().await?;
    let mut tx = conn.start_transaction(tx_opts()).await?;
    for (sku_id, mut msgs) in by_sku {
        msgs.sort_by_key(|m| (m.created_ms, m.request_id.clone()));
        let mut seen = HashSet::new();
        let before = msgs.len();
        msgs.retain(|m| seen.insert(m.request_id.clone()));
        report.duplicates += before - msgs.len();
        apply_sku(&mut tx, sku_id, msgs, &mut report).await?;
    }
    tx.commit().await?;
    Ok(report)
}

/// Applies one SKU's deductions inside `tx` (locks the SKU row first). Shared
/// by the consumer's batch and by a lifecycle transition that finds the
/// consumer behind, so both apply a deduction the same way.
pub async fn apply_sku(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    msgs: Vec<&DeductionMessage>,
    report: &mut BatchReport,
) -> Result<(), DbError> {
    let row = sku::lock(tx, sku_id).await?;
    let existing = existing_ids(tx, sku_id, &msgs).await?;
    let fresh: Vec<&DeductionMessage> = msgs
        .into_iter()
        .filter(|m| !existing.contains(m.request_id.as_str()))
        .collect();
    report.duplicates += existing.len();
    if fresh.is_empty() {
        return Ok(());
    }
    let mut remaining = row.map_or(0, |r| r.available_stock);
    let mut rows = Vec::with_capacity(fresh.len());
    let mut taken: i64 = 0;
    for msg in fresh {
        let count = i64::from(msg.count);
        if row.is_some() && count <= remaining {
            remaining -= count;
            taken += count;
            rows.push((msg, ReservationStatus::Reserved, None));
            report.applied += 1;
        } else {
            let why = if row.is_some() {
                reason::OVER_ADMITTED
            } else {
                reason::UNKNOWN_SKU
            };
            rows.push((msg, ReservationStatus::Rejected, Some(why)));
            report.rejected.push((msg.clone(), why));
        }
    }
    if taken > 0 {
        let took = sku::take(tx, sku_id, taken).await?;
        assert!(
            took,
            "the SKU row is locked and the fit was computed under the lock"
        );
    }
    insert_rows(tx, &rows).await
}

/// Request ids of `msgs` already present in the ledger.
async fn existing_ids(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    msgs: &[&DeductionMessage],
) -> Result<HashSet<String>, DbError> {
    let mut found = HashSet::new();
    for chunk in msgs.chunks(INSERT_CHUNK_ROWS) {
        let marks = vec!["?"; chunk.len()].join(",");
        let sql = format!(
            "SELECT deduct_request_id FROM stock_deduct_idempotent
             WHERE sku_id = ? AND deduct_request_id IN ({marks})"
        );
        let mut params: Vec<Value> = vec![sku_id.get().into()];
        params.extend(chunk.iter().map(|m| Value::from(m.request_id.as_str())));
        let ids: Vec<String> = tx.exec(sql, Params::Positional(params)).await?;
        found.extend(ids);
    }
    Ok(found)
}

type NewRow<'a> = (
    &'a DeductionMessage,
    ReservationStatus,
    Option<&'static str>,
);

/// Multi-row inserts. Plain INSERT, not IGNORE: a duplicate here means another
/// writer broke the lock protocol, and the error makes the batch retry.
pub async fn insert_rows(tx: &mut Transaction<'_>, rows: &[NewRow<'_>]) -> Result<(), DbError> {
    for chunk in rows.chunks(INSERT_CHUNK_ROWS) {
        let marks = vec!["(?,?,?,?,?,?,?,?)"; chunk.len()].join(",");
        let sql = format!(
            "INSERT INTO stock_deduct_idempotent (sku_id, deduct_request_id, user_id,
               deduct_count, status, reason, reserved_at_ms, expires_at_ms) VALUES {marks}"
        );
        let mut params: Vec<Value> = Vec::with_capacity(chunk.len() * 8);
        for (msg, status, why) in chunk {
            params.push(msg.sku_id.get().into());
            params.push(msg.request_id.as_str().into());
            params.push(msg.user_id.get().into());
            params.push(msg.count.into());
            params.push(status.as_str().into());
            params.push(why.map_or(Value::NULL, Value::from));
            params.push(msg.created_ms.into());
            params.push(msg.expires_ms.into());
        }
        tx.exec_drop(sql, Params::Positional(params)).await?;
    }
    Ok(())
}

type RawLedger = (u64, String, u64, u32, String, Option<String>, u64, u64, u8);

const LEDGER_COLUMNS: &str = "sku_id, deduct_request_id, user_id, deduct_count, status, reason,
    reserved_at_ms, expires_at_ms, redis_pending";

fn from_raw(raw: RawLedger) -> LedgerRow {
    LedgerRow {
        sku_id: SkuId::new(raw.0).expect("valid sku id in ledger"),
        request_id: RequestId::parse(&raw.1).expect("valid request id in ledger"),
        user_id: raw.2,
        count: raw.3,
        status: ReservationStatus::parse(&raw.4).expect("valid status in ledger"),
        reason: raw.5,
        reserved_at_ms: raw.6,
        expires_at_ms: raw.7,
        redis_pending: raw.8 != 0,
    }
}

/// One ledger row, without locking.
pub async fn find<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Result<Option<LedgerRow>, DbError> {
    let raw: Option<RawLedger> = q
        .exec_first(
            format!(
                "SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent
                 WHERE sku_id = ? AND deduct_request_id = ?"
            ),
            (sku_id.get(), request_id.as_str()),
        )
        .await?;
    Ok(raw.map(from_raw))
}

/// One ledger row, locked for a transition (take the SKU lock first).
pub async fn find_for_update(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Result<Option<LedgerRow>, DbError> {
    let raw: Option<RawLedger> = tx
        .exec_first(
            format!(
                "SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent
                 WHERE sku_id = ? AND deduct_request_id = ? FOR UPDATE"
            ),
            (sku_id.get(), request_id.as_str()),
        )
        .await?;
    Ok(raw.map(from_raw))
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

/// Expired `RESERVED` rows of one SKU, locked; rows another closer holds are
/// skipped (`SKIP LOCKED`), so concurrent sweeps split the work.
pub async fn expired_for_update(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    cutoff_ms: u64,
    limit: usize,
) -> Result<Vec<LedgerRow>, DbError> {
    let raw: Vec<RawLedger> = tx
        .exec(
            format!(
                "SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent
                 WHERE sku_id = ? AND status = 'RESERVED' AND expires_at_ms < ?
                 ORDER BY expires_at_ms LIMIT {limit} FOR UPDATE SKIP LOCKED"
            ),
            (sku_id.get(), cutoff_ms),
        )
        .await?;
    Ok(raw.into_iter().map(from_raw).collect())
}

/// Decided rows whose Redis mirror has not succeeded, oldest first. The finish
/// time is compared so a mirror its own request is still doing is left alone.
pub async fn pending_mirrors<Q: Queryable>(
    q: &mut Q,
    finished_before_ms: u64,
    limit: usize,
) -> Result<Vec<LedgerRow>, DbError> {
    let raw: Vec<RawLedger> = q
        .exec(
            format!(
                "SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent
                 WHERE redis_pending = 1 AND (finished_at_ms IS NULL OR finished_at_ms < ?)
                 LIMIT {limit}"
            ),
            (finished_before_ms,),
        )
        .await?;
    Ok(raw.into_iter().map(from_raw).collect())
}
