//! The `stock_deduct_idempotent` ledger and the consumer's batched apply (SPEC §4).
//!
//! One transaction per batch. Per SKU, in ascending id order (a fixed lock order
//! rules out deadlocks between consumers): lock the SKU row, skip the request ids
//! already in the ledger, fit the rest into each buyer's `limit_per_user` and into
//! `available_stock` (in reservation order), take their sum with the
//! `available_stock >= ?` guard, and insert the rows — fitting ones `RESERVED`,
//! the others `REJECTED` with the reason. MySQL stock can therefore never go
//! negative and no buyer ever holds more than the limit in MySQL, even when Redis
//! admitted more (after a Redis failover lost acknowledged writes: lost records
//! and buyer counters let Redis admit again what MySQL already holds).

use std::collections::{BTreeMap, HashMap, HashSet};

use mysql_async::prelude::Queryable;
use mysql_async::{IsolationLevel, Transaction, TxOpts};

use super::sql_text::SqlText;
use super::{sku, Db, DbError};
pub use crate::domain::Readmission;
use crate::domain::{Deduction, RequestId, ReservationStatus, SkuId, UserId};

/// Rows per multi-row INSERT (and ids per `IN` list), sent as text
/// (`sql_text`): ~150 bytes a row, far below `max_allowed_packet`.
const INSERT_CHUNK_ROWS: usize = 500;

/// Why a row was rejected or released; stored in `reason`.
pub mod reason {
    /// MySQL could not cover the deduction: Redis admitted more than exists.
    pub const OVER_ADMITTED: &str = "OVER_ADMITTED";
    /// The buyer already holds `limit_per_user` live units in MySQL: Redis
    /// admitted it after losing the buyer's counter. The unit exists, so the
    /// Redis mirror gives it back to `available`.
    pub const LIMIT_EXCEEDED: &str = "LIMIT_EXCEEDED";
    /// The SKU does not exist in MySQL.
    pub const UNKNOWN_SKU: &str = "UNKNOWN_SKU";
    pub const CANCELLED: &str = "CANCELLED";
    pub const EXPIRED: &str = "EXPIRED";

    /// Whether a `REJECTED` row with this reason still has its unit in MySQL's
    /// stock, so Redis must return the unit it took (not only the quota).
    pub fn rejection_returns_stock(reason: Option<&str>) -> bool {
        reason == Some(LIMIT_EXCEEDED)
    }
}

/// What one batch did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchReport {
    /// New rows inserted as `RESERVED` (stock taken).
    pub applied: usize,
    /// Deliveries whose `(sku_id, request_id)` was already in the ledger.
    pub duplicates: usize,
    /// New rows inserted as `REJECTED`, with the reason.
    pub rejected: Vec<(Deduction, &'static str)>,
    /// Duplicates admitted by Redis at another time than the ledger row: Redis
    /// lost the first record and took the request id again (see
    /// `RedisStore::settle_readmission`).
    pub readmitted: Vec<Readmission>,
    /// Duplicates whose ledger row belongs to another buyer, with that
    /// buyer: a SKU split into buckets admits a request id once per bucket
    /// (see `RedisStore::reject_foreign_duplicate`).
    pub foreign: Vec<(Deduction, UserId)>,
}

/// A ledger row as the lifecycle and the API read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    pub sku_id: SkuId,
    pub request_id: RequestId,
    pub user_id: UserId,
    pub count: u32,
    pub status: ReservationStatus,
    pub reason: Option<String>,
    pub reserved_at_ms: u64,
    pub expires_at_ms: u64,
    pub redis_pending: bool,
}

impl LedgerRow {
    /// The row the consumer inserted for a deduction it rejected.
    pub fn rejected(msg: &Deduction, why: &str) -> Self {
        Self {
            sku_id: msg.sku_id,
            request_id: msg.request_id.clone(),
            user_id: msg.user_id,
            count: msg.count,
            status: ReservationStatus::Rejected,
            reason: Some(why.to_string()),
            reserved_at_ms: msg.created_ms,
            expires_at_ms: msg.expires_ms,
            redis_pending: true,
        }
    }

    pub fn to_reservation(&self) -> crate::domain::Reservation {
        crate::domain::Reservation {
            request_id: self.request_id.clone(),
            sku_id: self.sku_id,
            user_id: self.user_id,
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
    batch: &[Deduction],
    retries: u32,
) -> Result<BatchReport, DbError> {
    let mut attempt = 0;
    loop {
        match db.bounded(apply_batch_once(db, batch)).await {
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

async fn apply_batch_once(db: &Db, batch: &[Deduction]) -> Result<BatchReport, DbError> {
    let mut by_sku: BTreeMap<SkuId, Vec<&Deduction>> = BTreeMap::new();
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
    msgs: Vec<&Deduction>,
    report: &mut BatchReport,
) -> Result<(), DbError> {
    let row = sku::lock(tx, sku_id).await?;
    let existing = existing_rows(tx, sku_id, &msgs).await?;
    let mut fresh = Vec::with_capacity(msgs.len());
    for msg in msgs {
        match existing.get(msg.request_id.as_str()) {
            None => fresh.push(msg),
            Some(&(created_ms, expires_ms, owner)) => {
                report.duplicates += 1;
                if owner != msg.user_id.get() {
                    if let Ok(owner) = UserId::new(owner) {
                        report.foreign.push((msg.clone(), owner));
                    }
                } else if created_ms != msg.created_ms {
                    report.readmitted.push(Readmission {
                        msg: msg.clone(),
                        row_created_ms: created_ms,
                        row_expires_ms: expires_ms,
                    });
                }
            }
        }
    }
    if fresh.is_empty() {
        return Ok(());
    }
    let Some(row) = row else {
        let rows: Vec<NewRow> = fresh
            .into_iter()
            .map(|msg| {
                report.rejected.push((msg.clone(), reason::UNKNOWN_SKU));
                (msg, ReservationStatus::Rejected, Some(reason::UNKNOWN_SKU))
            })
            .collect();
        return insert_rows(tx, &rows).await;
    };
    let mut held = buyers_live_units(tx, sku_id, &fresh).await?;
    let limit = i64::from(row.limit_per_user);
    let mut remaining = row.available_stock;
    let mut rows = Vec::with_capacity(fresh.len());
    let mut taken: i64 = 0;
    for msg in fresh {
        let count = i64::from(msg.count);
        let buyer = held.entry(msg.user_id.get()).or_insert(0);
        let why = if *buyer + count > limit {
            Some(reason::LIMIT_EXCEEDED)
        } else if count > remaining {
            Some(reason::OVER_ADMITTED)
        } else {
            None
        };
        match why {
            None => {
                remaining -= count;
                taken += count;
                *buyer += count;
                rows.push((msg, ReservationStatus::Reserved, None));
                report.applied += 1;
            }
            Some(why) => {
                rows.push((msg, ReservationStatus::Rejected, Some(why)));
                report.rejected.push((msg.clone(), why));
            }
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

/// Ledger rows of `msgs` already present: request id → (reserved_at_ms, expires_at_ms).
async fn existing_rows(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    msgs: &[&Deduction],
) -> Result<HashMap<String, (u64, u64, u64)>, DbError> {
    let mut found = HashMap::new();
    for chunk in msgs.chunks(INSERT_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "SELECT deduct_request_id, reserved_at_ms, expires_at_ms, user_id FROM stock_deduct_idempotent
             WHERE sku_id = ",
        );
        sql.int(sku_id.get())
            .raw(" AND deduct_request_id IN (")
            .request_ids(chunk.iter().map(|m| &m.request_id))
            .raw(")");
        let rows: Vec<(String, u64, u64, u64)> = tx.query(sql.finish()).await?;
        found.extend(rows.into_iter().map(|(id, c, e, u)| (id, (c, e, u))));
    }
    Ok(found)
}

/// Live (RESERVED + CONFIRMED) units each buyer of `msgs` holds of the SKU
/// (index `idx_sku_user_status`; the SKU row lock keeps it stable).
async fn buyers_live_units(
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

type NewRow<'a> = (&'a Deduction, ReservationStatus, Option<&'static str>);

/// Multi-row inserts. Plain INSERT, not IGNORE: a duplicate here means another
/// writer broke the lock protocol, and the error makes the batch retry.
/// `REJECTED` rows start with `redis_pending = 1`: Redis must still be told (the
/// quota, and for some reasons the unit, go back), and the closer's sweep
/// retries that mirror until it succeeded.
pub async fn insert_rows(tx: &mut Transaction<'_>, rows: &[NewRow<'_>]) -> Result<(), DbError> {
    for chunk in rows.chunks(INSERT_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "INSERT INTO stock_deduct_idempotent (sku_id, deduct_request_id, user_id,
               deduct_count, status, reason, reserved_at_ms, expires_at_ms, redis_pending)
             VALUES ",
        );
        sql.list(chunk, ",", |s, (msg, status, why)| {
            s.raw("(")
                .int(msg.sku_id.get())
                .raw(",")
                .request_id(&msg.request_id)
                .raw(",")
                .int(msg.user_id.get())
                .raw(",")
                .int(msg.count)
                .raw(",")
                .constant(status.as_str())
                .raw(",");
            match why {
                Some(why) => s.constant(why),
                None => s.null(),
            };
            s.raw(",")
                .int(msg.created_ms)
                .raw(",")
                .int(msg.expires_ms)
                .raw(",")
                .int(u8::from(*status == ReservationStatus::Rejected))
                .raw(")");
        });
        tx.query_drop(sql.finish()).await?;
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
        user_id: UserId::new(raw.2).expect("valid user id in ledger"),
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

/// One page of a SKU's ledger rows reserved after `reserved_after_ms`, in
/// request-id order after `after_id` (keyset pagination on the primary key).
pub async fn page_since<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    reserved_after_ms: u64,
    after_id: &str,
    limit: usize,
) -> Result<Vec<LedgerRow>, DbError> {
    let raw: Vec<RawLedger> = q
        .exec(
            format!(
                "SELECT {LEDGER_COLUMNS} FROM stock_deduct_idempotent
                 WHERE sku_id = ? AND deduct_request_id > ? AND reserved_at_ms > ?
                 ORDER BY deduct_request_id LIMIT {limit}"
            ),
            (sku_id.get(), after_id, reserved_after_ms),
        )
        .await?;
    Ok(raw.into_iter().map(from_raw).collect())
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

/// Buyers of a SKU holding more live units than `limit` (SPEC §10.6).
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
