//! The consumer's batched apply of deductions to the ledger (contract §4).
//!
//! One transaction per batch. Per SKU, in ascending id order (a fixed lock order
//! rules out deadlocks between consumers): lock the SKU row, skip the request ids
//! already in the ledger, fit the rest into each buyer's `limit_per_user` and into
//! `available_stock` (in reservation order: [`crate::domain::admission`]), take their sum with the
//! `available_stock >= ?` guard, and insert the rows — fitting ones `RESERVED`,
//! the others `REJECTED` with the reason. MySQL stock can therefore never go
//! negative and no buyer ever holds more than the limit in MySQL, even when Redis
//! admitted more (after a Redis failover lost acknowledged writes: lost records
//! and buyer counters let Redis admit again what MySQL already holds).

use std::collections::{BTreeMap, HashMap, HashSet};

use mysql_async::Transaction;

use super::apply_order::{apply_orders, expand, OrderCheck};
use super::first_telling::first_expiry;
use super::held::{buyers_live_units, take_fitted};
use super::insert::{insert_rows, note_inserted, NewRow};
use super::known::{existing_rows, KnownRow};
use super::{reason, tx_opts, BatchReport, Readmission};
use crate::clock::unix_ms;
use crate::db::event_outbox;
use crate::db::sku::{self, SkuRow};
use crate::db::{Db, DbError};
use crate::domain::admission::{admit, Claim};
use crate::domain::{Deduction, ReservationStatus, SkuId, UserId};
use crate::events::{Event, EventType, Outgoing};

/// Who tells the `persisted`/`rejected` events of the rows a batch inserts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Telling {
    /// The caller, after the commit (`BatchReport::told`): the consumer,
    /// which publishes them before it acks, so a batch committed but not
    /// told comes back and is told again from its rows.
    ByCaller,
    /// The event outbox, in the batch's own transaction: a path that has no
    /// delivery to hold back (the lifecycle applying a deduction first).
    InOutbox,
}

/// Applies a batch: one transaction, or several when its orders have more
/// lines than one transaction should hold ([`super::order_chunks`]); the
/// consumer's path ([`Telling::ByCaller`]).
pub async fn apply_batch(
    db: &Db,
    batch: &[Deduction],
    retries: u32,
) -> Result<BatchReport, DbError> {
    apply_batch_told(db, batch, retries, Telling::ByCaller).await
}

/// [`apply_batch`], its events told as `telling` says. Every path that
/// applies a deduction goes through here, so each applies it — and tells
/// it, the SKU's crossings included — exactly as the consumer would.
pub async fn apply_batch_told(
    db: &Db,
    batch: &[Deduction],
    retries: u32,
    telling: Telling,
) -> Result<BatchReport, DbError> {
    let mut report = BatchReport::default();
    for run in super::order_chunks::split(batch, super::order_chunks::ORDER_LINES_PER_TX) {
        report.absorb(apply_run(db, run, retries, telling).await?);
    }
    Ok(report)
}

/// Applies one run of messages in one transaction, retrying it whole on
/// deadlock or lock timeout.
///
/// Orders are first applied without looking them up: neither the `orders`
/// row (an order's idempotency key) nor each line's ledger row is read
/// before the insert ([`OrderCheck::ByInsert`]). An order MySQL has already
/// (a redelivery, a relay's republish) or a line row of its id (the order
/// id names a single reservation of that SKU, which Redis refuses at
/// admission but may accept after losing data) makes the multi-row insert
/// fail on its primary key; the run is then applied again, once, with
/// both looked up first ([`OrderCheck::LookedUp`]: a duplicate order is
/// skipped and told again, a clashing line rejects its order), not counted
/// as a retry. Duplicates are rare; the two lookups were a fifth of
/// MariaDB's work per 3-line order (docs/benchmarks-history.md, "Orders").
async fn apply_run(
    db: &Db,
    batch: &[Deduction],
    retries: u32,
    telling: Telling,
) -> Result<BatchReport, DbError> {
    let mut attempt = 0;
    let mut check = OrderCheck::ByInsert;
    loop {
        match db
            .bounded(apply_batch_once(db, batch, check, telling))
            .await
        {
            Err(err) if is_duplicate(&err) && check == OrderCheck::ByInsert => {
                check = OrderCheck::LookedUp;
                tracing::info!(error = %err,
                    "batch.orders: an order or a line row is there already; applied again with them looked up");
            }
            Err(err) if (err.is_retryable() || is_duplicate(&err)) && attempt < retries => {
                attempt += 1;
                tracing::warn!(error = %err, attempt, "batch.retry: transaction retried");
            }
            other => return other,
        }
    }
}

fn is_duplicate(err: &DbError) -> bool {
    err.server_code() == Some(crate::db::codes::ER_DUP_ENTRY)
}

async fn apply_batch_once(
    db: &Db,
    batch: &[Deduction],
    check: OrderCheck,
    telling: Telling,
) -> Result<BatchReport, DbError> {
    let (singles, orders) = expand(batch);
    let mut by_sku: BTreeMap<SkuId, Vec<&Deduction>> = BTreeMap::new();
    for msg in singles {
        by_sku.entry(msg.sku_id).or_default().push(msg);
    }
    let mut report = BatchReport::default();
    let mut out = db.outgoing();
    let mut conn = db.conn().await?;
    let mut tx = conn.start_transaction(tx_opts()).await?;
    if !orders.is_empty() {
        // One lock order for the whole transaction: every SKU of the batch,
        // singles' and orders' lines alike, ascending; the per-SKU steps
        // below lock them again (a no-op), so no two consumers deadlock.
        let mut every_sku: Vec<SkuId> = by_sku.keys().copied().collect();
        every_sku.extend(orders.values().flatten().map(|line| line.sku_id));
        every_sku.sort_unstable();
        every_sku.dedup();
        for sku_id in every_sku {
            sku::lock_noted(&mut tx, sku_id, &mut out).await?;
        }
    }
    for (sku_id, mut msgs) in by_sku {
        msgs.sort_by_key(|m| (m.created_ms, m.request_id.clone()));
        let mut seen = HashSet::new();
        let before = msgs.len();
        msgs.retain(|m| seen.insert(m.request_id.clone()));
        report.duplicates += before - msgs.len();
        apply_sku(&mut tx, sku_id, msgs, &mut report, &mut out).await?;
    }
    if !orders.is_empty() {
        apply_orders(&mut tx, &orders, check, &mut report, &mut out).await?;
    }
    if telling == Telling::ByCaller {
        report.told = out.take_events();
    }
    event_outbox::stage(&mut tx, out, unix_ms()).await?;
    tx.commit().await?;
    Ok(report)
}

/// Applies one SKU's deductions inside `tx` (locks the SKU row first) and
/// notes their events in `out`.
async fn apply_sku(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    msgs: Vec<&Deduction>,
    report: &mut BatchReport,
    out: &mut Outgoing,
) -> Result<(), DbError> {
    let row = sku::lock_noted(tx, sku_id, out).await?;
    let existing = existing_rows(tx, sku_id, &msgs).await?;
    retell(out, &msgs, &existing, unix_ms());
    let fresh = skip_known(msgs, &existing, report);
    if fresh.is_empty() {
        return Ok(());
    }
    let Some(row) = row else {
        let mut rows: Vec<NewRow> = fresh
            .into_iter()
            .map(|msg| {
                report.rejected.push((msg.clone(), reason::UNKNOWN_SKU));
                NewRow::new(msg, ReservationStatus::Rejected, Some(reason::UNKNOWN_SKU))
            })
            .collect();
        note_inserted(out, &mut rows, unix_ms());
        return insert_rows(tx, &rows).await;
    };
    let held = buyers_live_units(tx, sku_id, &fresh).await?;
    let (mut rows, taken) = fit(fresh, &row, &held, report);
    take_fitted(tx, sku_id, taken).await?;
    note_inserted(out, &mut rows, unix_ms());
    insert_rows(tx, &rows).await
}

/// `msgs` without those the ledger already holds (`existing`), each counted
/// as a duplicate — and noted when another buyer owns the row (`foreign`) or
/// Redis admitted it again after losing its record (`readmitted`).
fn skip_known<'a>(
    msgs: Vec<&'a Deduction>,
    existing: &HashMap<String, KnownRow>,
    report: &mut BatchReport,
) -> Vec<&'a Deduction> {
    let mut fresh = Vec::with_capacity(msgs.len());
    for msg in msgs {
        let Some(known) = existing.get(msg.request_id.as_str()) else {
            fresh.push(msg);
            continue;
        };
        report.duplicates += 1;
        if known.user_id != msg.user_id.get() {
            if let Ok(owner) = UserId::new(known.user_id) {
                report.foreign.push((msg.clone(), owner));
            }
        } else if known.created_ms != msg.created_ms {
            report.readmitted.push(Readmission {
                msg: msg.clone(),
                row_created_ms: known.created_ms,
                row_expires_ms: known.expires_ms,
            });
        }
    }
    fresh
}

/// The events of deductions the ledger already holds, told again from
/// their rows (`persisted`, or `rejected` with its reason): a duplicate is
/// most often the redelivery of a batch whose consumer died between its
/// commit and the publish of its events, which only the redelivery can
/// still tell. Same ids as the first telling; `available` is the SKU's now.
fn retell(
    out: &mut Outgoing,
    msgs: &[&Deduction],
    existing: &HashMap<String, KnownRow>,
    time_ms: u64,
) {
    for msg in msgs {
        let Some(known) = existing.get(msg.request_id.as_str()) else {
            continue;
        };
        let (kind, why) = match known.status.as_str() {
            "REJECTED" => (EventType::Rejected, known.reason.as_deref()),
            _ => (EventType::Persisted, None),
        };
        let Ok(user_id) = UserId::new(known.user_id) else {
            continue;
        };
        if !out.wants(kind) {
            continue;
        }
        let row = (known.extensions, known.created_ms, known.expires_ms);
        let Some(expires_ms) = first_expiry(row, msg) else {
            continue;
        };
        // The first telling's facts: the row's, not the message's (they may
        // differ: a readmission), with the deadline it had then.
        let facts = Deduction {
            user_id,
            count: known.count,
            created_ms: known.created_ms,
            expires_ms,
            ..(*msg).clone()
        };
        // The available the first telling said; a row from before
        // `told_available` existed is told with the available of now.
        let available = known
            .told_available
            .or_else(|| out.available(msg.sku_id).or(Some(0)));
        out.push(Event::reservation(kind, &facts, available, why, time_ms));
    }
}

/// The admission rule over the locked SKU `row`: one ledger row per deduction
/// (`RESERVED`, or `REJECTED` with the reason) and the units to take.
fn fit<'a>(
    fresh: Vec<&'a Deduction>,
    row: &SkuRow,
    held: &HashMap<u64, i64>,
    report: &mut BatchReport,
) -> (Vec<NewRow<'a>>, i64) {
    let claims: Vec<Claim> = (fresh.iter())
        .map(|m| Claim {
            user_id: m.user_id.get(),
            count: i64::from(m.count),
        })
        .collect();
    let limit = i64::from(row.limit_per_user);
    let admitted = admit(&claims, row.available_stock, limit, held);
    let mut rows = Vec::with_capacity(fresh.len());
    for (msg, answer) in fresh.into_iter().zip(admitted.answers) {
        match answer.map(reason::of) {
            None => {
                rows.push(NewRow::new(msg, ReservationStatus::Reserved, None));
                report.applied += 1;
            }
            Some(why) => {
                rows.push(NewRow::new(msg, ReservationStatus::Rejected, Some(why)));
                report.rejected.push((msg.clone(), why));
            }
        }
    }
    (rows, admitted.taken)
}
