//! The consumer's apply of whole orders (docs/architecture.md, "Orders"):
//! inside the batch transaction, after the batch's single deductions, each
//! order is fitted line by line against its SKU rows (locked by the batch
//! already, in ascending id order) and the buyer's live units, all read
//! once per transaction ([`apply_orders`]). Every line
//! fits: every line `RESERVED`, stock taken, the order row `RESERVED`. One
//! line does not: every line `REJECTED` (that one with its reason, the
//! others `ORDER_REJECTED`), nothing taken, the order row `REJECTED` with
//! the reason and the SKU. No partial order is ever live in MySQL.
//!
//! Any one line's deduction names the whole order (`Deduction::order`), so
//! the batch expands it into every line first ([`expand`]): an order is
//! applied whole whichever of its messages (the api's, a relay's republish of
//! one line's entry) arrives first; the later ones are duplicates.
//!
//! Why not one fit with `apply.rs`'s: a single reservation is fitted alone
//! within its SKU (one refused leaves the others of the SKU admitted), an
//! order all or nothing across its SKUs, so its fit must see every SKU of the
//! run before any row is written, and it tells one event per order, not per
//! row. Every step the two share has one home: the admission rule
//! (`domain::admission`), the buyers' live units and the take (`held`), the
//! rows already there (`known`), the inserts (`insert`), the deadline a
//! duplicate is told again with (`first_telling`).

use std::collections::{BTreeMap, HashMap, HashSet};

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::first_telling::first_expiry;
use super::held::{buyers_live_units, take_fitted};
use super::insert::{insert_rows, NewRow};
use super::known::existing_rows;
use super::{reason, BatchReport, INSERT_CHUNK_ROWS};
use crate::clock::unix_ms;
use crate::db::sku::{self, SkuRow};
use crate::db::sql_text::SqlText;
use crate::db::DbError;
use crate::domain::admission::refusal;
use crate::domain::{Deduction, OrderLines, RequestId, ReservationStatus, SkuId, UserId};
use crate::events::{Event, EventType, OrderFacts, Outgoing};

/// The batch's single deductions, and its orders expanded into every line
/// (by order id; the first message of an order seen decides its facts).
pub(super) fn expand(
    batch: &[Deduction],
) -> (Vec<&Deduction>, BTreeMap<RequestId, Vec<Deduction>>) {
    let mut singles = Vec::new();
    let mut orders = BTreeMap::new();
    for msg in batch {
        match &msg.order {
            None => singles.push(msg),
            Some(lines) => {
                orders.entry(msg.request_id.clone()).or_insert_with(|| {
                    Deduction::of_order_by(
                        &msg.request_id,
                        msg.user_id,
                        lines,
                        msg.created_ms,
                        msg.expires_ms,
                        msg.client.as_deref(),
                    )
                });
            }
        }
    }
    (singles, orders)
}

/// How the orders MySQL has already, and the ledger rows of an order's
/// lines, are found (`apply::apply_run`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OrderCheck {
    /// By the insert's primary key: no lookup (the common case).
    ByInsert,
    /// Looked up first: a known order is a duplicate, a known line fails
    /// its order (`ORDER_REJECTED`).
    LookedUp,
}

/// What the fit of one SKU's order lines knows, read once per run.
struct SkuFit {
    /// `None`: MySQL has no such SKU.
    row: Option<SkuRow>,
    /// Request ids that already hold a ledger row of this SKU.
    known: HashSet<String>,
    /// Live units each buyer holds of the SKU, kept up to date as lines fit.
    held: HashMap<u64, i64>,
    /// Units the run's fitting lines take.
    taken: i64,
}

/// Why `line` does not fit `fit` now, if it does not: the SKU unknown to
/// MySQL, the buyer's `limit_per_user` (single reservations and order lines
/// together), or the stock (Redis admitted more than MySQL has).
fn misfit(fit: &SkuFit, line: &Deduction) -> Option<&'static str> {
    let Some(row) = &fit.row else {
        return Some(reason::UNKNOWN_SKU);
    };
    let count = i64::from(line.count);
    let held = fit.held.get(&line.user_id.get()).copied().unwrap_or(0);
    let left = row.available_stock - fit.taken;
    refusal(held, count, i64::from(row.limit_per_user), left).map(reason::of)
}

/// Applies the run's orders (each one's lines sorted by SKU id; every SKU
/// row locked by the batch already), after its single deductions.
///
/// Set-based: the orders already in MySQL and each SKU's lines already in
/// the ledger (only with [`OrderCheck::LookedUp`]: else such a row fails
/// the insert, and the run is applied again with them looked up), each
/// SKU's row and its buyers' live units are read once for the whole run;
/// the orders are then fitted one after another in memory
/// (each sees the units and quota the ones before it took: the SKU rows
/// are locked, nothing else moves them), and what fits is taken with one
/// guarded `UPDATE` per SKU and inserted with multi-row inserts. The
/// same outcome as fitting line by line with a statement each, in some
/// fifteen statements per run instead of per order (docs/benchmarks-history.md,
/// "Orders").
pub(super) async fn apply_orders(
    tx: &mut Transaction<'_>,
    orders: &BTreeMap<RequestId, Vec<Deduction>>,
    check: OrderCheck,
    report: &mut BatchReport,
    out: &mut Outgoing,
) -> Result<(), DbError> {
    let known_orders = match check {
        OrderCheck::LookedUp => known_orders(tx, orders.keys()).await?,
        OrderCheck::ByInsert => HashMap::new(),
    };
    let mut fresh: Vec<&[Deduction]> = Vec::with_capacity(orders.len());
    for (order_id, lines) in orders {
        if let Some(known) = known_orders.get(order_id.as_str()) {
            report.duplicates += lines.len();
            retell(out, order_id, known, &lines[0], unix_ms());
        } else if !lines.is_empty() {
            fresh.push(lines);
        }
    }
    let mut by_sku: BTreeMap<SkuId, Vec<&Deduction>> = BTreeMap::new();
    for line in fresh.iter().copied().flatten() {
        by_sku.entry(line.sku_id).or_default().push(line);
    }
    let mut fits: BTreeMap<SkuId, SkuFit> = BTreeMap::new();
    for (sku_id, lines) in &by_sku {
        let row = sku::lock_noted(tx, *sku_id, out).await?;
        let known = match check {
            OrderCheck::LookedUp => existing_rows(tx, *sku_id, lines)
                .await?
                .into_keys()
                .collect(),
            OrderCheck::ByInsert => HashSet::new(),
        };
        let held = match row {
            Some(_) => buyers_live_units(tx, *sku_id, lines).await?,
            None => HashMap::new(),
        };
        let fit = SkuFit {
            row,
            known,
            held,
            taken: 0,
        };
        fits.insert(*sku_id, fit);
    }
    let mut rows: Vec<NewRow> = Vec::new();
    let mut order_rows = Vec::with_capacity(fresh.len());
    for lines in fresh {
        let failed = fit_order(lines, &mut fits, &mut rows, report);
        order_rows.push((&lines[0], failed));
    }
    for (sku_id, fit) in &fits {
        take_fitted(tx, *sku_id, fit.taken).await?;
    }
    let told = note_orders(out, &order_rows, unix_ms());
    for row in &mut rows {
        let key = (row.msg.request_id.as_str(), row.msg.sku_id);
        row.told_available = told.get(&key).copied().flatten();
    }
    // One SKU's rows after another (stable: each SKU's in fitting order),
    // not order after order: InnoDB inserts neighbours into the pages it
    // just touched instead of jumping between three SKUs' ranges per order
    // (8 % of MariaDB's instructions per 3-line order under callgrind).
    rows.sort_by_key(|row| row.msg.sku_id);
    insert_rows(tx, &rows).await?;
    insert_orders(tx, &order_rows).await
}

/// One event per order fitted (`stockd.order.persisted`, or `.rejected`
/// naming the failing line's SKU and why), never one per line; the lines
/// of a persisted order leave their SKUs' available, as `sku::take` took
/// them, before its event reads it.
fn note_orders<'a>(
    out: &mut Outgoing,
    orders: &[(&'a Deduction, Option<(&Deduction, &'static str)>)],
    time_ms: u64,
) -> HashMap<(&'a str, SkuId), Option<i64>> {
    let mut told = HashMap::new();
    for (first, failed) in orders {
        let Some(facts) = OrderFacts::of_line(first) else {
            continue;
        };
        let kind = match failed {
            None => {
                for line in facts.lines.lines() {
                    out.moved(line.sku_id, -i64::from(line.count), 0);
                }
                EventType::Persisted
            }
            Some(_) => EventType::Rejected,
        };
        let available = |sku| out.available(sku).or(Some(0));
        for line in facts.lines.lines() {
            told.insert(
                (first.request_id.as_str(), line.sku_id),
                available(line.sku_id),
            );
        }
        if !out.wants(kind.of_order()) {
            continue;
        }
        let (why, sku) = failed.map(|(line, why)| (why, line.sku_id)).unzip();
        let event = Event::order(kind, &facts, available, why, sku, time_ms);
        out.push(event);
    }
    told
}

/// An order MySQL already has, as its row stores it: the events of a
/// duplicate are told again from it.
struct KnownOrder {
    user_id: u64,
    lines: String,
    status: String,
    reason: Option<String>,
    failed_sku_id: Option<u64>,
    reserved_at_ms: u64,
    expires_at_ms: u64,
    /// Moves of the deadline since the order was written (`extend`).
    extensions: u32,
    /// What the first telling said of each line's SKU (NULL before 0008).
    told_available: HashMap<SkuId, Option<i64>>,
}

/// The event of an order MySQL already has, told again from its row
/// (`persisted`, or `rejected` with its reason): a duplicate is most often
/// the redelivery of a batch whose consumer died between its commit and the
/// publish of its events, which only the redelivery can still tell. Same id
/// and the same data as the first telling: each line's SKU available as its
/// row stored it (`told_available`; the available of now for a row from
/// before it), the deadline before any extension.
fn retell(
    out: &mut Outgoing,
    order_id: &RequestId,
    known: &KnownOrder,
    msg: &Deduction,
    time_ms: u64,
) {
    let kind = match known.status.as_str() {
        "REJECTED" => EventType::Rejected,
        _ => EventType::Persisted,
    };
    if !out.wants(kind.of_order()) {
        return;
    }
    let (Ok(user_id), Ok(lines)) = (UserId::new(known.user_id), OrderLines::decode(&known.lines))
    else {
        return;
    };
    let row = (known.extensions, known.reserved_at_ms, known.expires_at_ms);
    let Some(expires_ms) = first_expiry(row, msg) else {
        return;
    };
    let facts = OrderFacts {
        order_id,
        user_id,
        lines: &lines,
        created_ms: known.reserved_at_ms,
        expires_ms,
    };
    // A persisted order's first telling had no reason: a cancel or expiry
    // since then (the row's reason now) is another change's.
    let (why, failed) = match kind {
        EventType::Rejected => (
            known.reason.as_deref(),
            known.failed_sku_id.and_then(|s| SkuId::new(s).ok()),
        ),
        _ => (None, None),
    };
    let told = |sku| match known.told_available.get(&sku) {
        Some(Some(available)) => Some(*available),
        _ => out.available(sku).or(Some(0)),
    };
    let event = Event::order(kind, &facts, told, why, failed, time_ms);
    out.push(event);
}

/// Fits one order into `fits`: every line (taken in `fits`, rows
/// `RESERVED`) or none (rows `REJECTED`: the failing line with its reason,
/// the others `ORDER_REJECTED`). A line whose id already holds a row of its
/// SKU (a single reservation of the same id) gets no row and fails the
/// order. Returns the failing line and why, if one failed.
fn fit_order<'a>(
    lines: &'a [Deduction],
    fits: &mut BTreeMap<SkuId, SkuFit>,
    rows: &mut Vec<NewRow<'a>>,
    report: &mut BatchReport,
) -> Option<(&'a Deduction, &'static str)> {
    let mut failed: Option<(&Deduction, &'static str)> = None;
    let mut fresh = Vec::with_capacity(lines.len());
    for line in lines {
        let fit = fits.get(&line.sku_id).expect("every line's SKU was read");
        if fit.known.contains(line.request_id.as_str()) {
            report.duplicates += 1;
            failed.get_or_insert((line, reason::ORDER_REJECTED));
            continue;
        }
        fresh.push(line);
        if failed.is_none() {
            failed = misfit(fit, line).map(|why| (line, why));
        }
    }
    match failed {
        None => {
            for line in fresh {
                let fit = fits.get_mut(&line.sku_id).expect("read above");
                let count = i64::from(line.count);
                fit.taken += count;
                *fit.held.entry(line.user_id.get()).or_insert(0) += count;
                report.applied += 1;
                rows.push(NewRow::new(line, ReservationStatus::Reserved, None));
            }
        }
        Some((failing, why)) => {
            for line in fresh {
                let why = if line.sku_id == failing.sku_id {
                    why
                } else {
                    reason::ORDER_REJECTED
                };
                report.rejected.push((line.clone(), why));
                rows.push(NewRow::new(line, ReservationStatus::Rejected, Some(why)));
            }
        }
    }
    failed
}

/// The orders of `order_ids` MySQL has a row for (locked), by id.
async fn known_orders<'a>(
    tx: &mut Transaction<'_>,
    order_ids: impl Iterator<Item = &'a RequestId>,
) -> Result<HashMap<String, KnownOrder>, DbError> {
    let ids: Vec<&RequestId> = order_ids.collect();
    let mut known = HashMap::new();
    for chunk in ids.chunks(INSERT_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "SELECT order_id, user_id, order_lines, status, reason, failed_sku_id,
                    reserved_at_ms, expires_at_ms, extensions
               FROM orders WHERE order_id IN (",
        );
        sql.request_ids(chunk.iter().copied()).raw(") FOR UPDATE");
        type Raw = (
            String,
            u64,
            String,
            String,
            Option<String>,
            Option<u64>,
            u64,
            u64,
            u32,
        );
        let found: Vec<Raw> = tx.query(sql.finish()).await?;
        known.extend(found.into_iter().map(|r| {
            let order = KnownOrder {
                user_id: r.1,
                lines: r.2,
                status: r.3,
                reason: r.4,
                failed_sku_id: r.5,
                reserved_at_ms: r.6,
                expires_at_ms: r.7,
                extensions: r.8,
                told_available: HashMap::new(),
            };
            (r.0, order)
        }));
    }
    told_availables(tx, &mut known).await?;
    Ok(known)
}

/// Each known order's lines' `told_available` (what its first telling said
/// of each SKU), read by primary key from the line rows.
async fn told_availables(
    tx: &mut Transaction<'_>,
    known: &mut HashMap<String, KnownOrder>,
) -> Result<(), DbError> {
    let mut keys: Vec<(u64, RequestId)> = Vec::new();
    for (order_id, order) in known.iter() {
        let (Ok(lines), Ok(id)) = (OrderLines::decode(&order.lines), RequestId::parse(order_id))
        else {
            continue;
        };
        keys.extend(lines.lines().iter().map(|l| (l.sku_id.get(), id.clone())));
    }
    let mut found: Vec<(String, u64, Option<i64>)> = Vec::new();
    for chunk in keys.chunks(INSERT_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "SELECT deduct_request_id, sku_id, told_available FROM stock_deduct_idempotent
              WHERE ",
        );
        sql.list(chunk, " OR ", |s, (sku, id)| {
            s.raw("(sku_id = ")
                .int(*sku)
                .raw(" AND deduct_request_id = ")
                .request_id(id)
                .raw(")");
        });
        found.extend(
            tx.query::<(String, u64, Option<i64>), _>(sql.finish())
                .await?,
        );
    }
    for (order_id, sku, told) in found {
        let (Some(order), Ok(sku)) = (known.get_mut(&order_id), SkuId::new(sku)) else {
            continue;
        };
        order.told_available.insert(sku, told);
    }
    Ok(())
}

/// The order rows: `RESERVED`, or `REJECTED` with the first failing line's
/// reason and SKU; one multi-row insert per [`INSERT_CHUNK_ROWS`] orders.
async fn insert_orders(
    tx: &mut Transaction<'_>,
    orders: &[(&Deduction, Option<(&Deduction, &'static str)>)],
) -> Result<(), DbError> {
    for chunk in orders.chunks(INSERT_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "INSERT INTO orders (order_id, user_id, order_lines, status, reason, failed_sku_id,
               reserved_at_ms, expires_at_ms, client)
             VALUES ",
        );
        sql.list(chunk, ",", |s, (first, failed)| {
            let lines = first
                .order
                .as_ref()
                .map(|l| l.encode())
                .expect("an order line names its order");
            s.raw("(")
                .request_id(&first.request_id)
                .raw(",")
                .int(first.user_id.get())
                .raw(",")
                .hex(lines.as_bytes())
                .raw(",");
            match failed {
                None => s
                    .constant(ReservationStatus::Reserved.as_str())
                    .raw(",")
                    .null()
                    .raw(",")
                    .null(),
                Some((line, why)) => s
                    .constant(ReservationStatus::Rejected.as_str())
                    .raw(",")
                    .constant(why)
                    .raw(",")
                    .int(line.sku_id.get()),
            };
            s.raw(",")
                .int(first.created_ms)
                .raw(",")
                .int(first.expires_ms)
                .raw(",");
            // The client's name as the hex of its bytes (`ledger::insert_rows`).
            match &first.client {
                Some(client) => s.hex(client.as_bytes()),
                None => s.null(),
            };
            s.raw(")");
        });
        tx.query_drop(sql.finish()).await?;
    }
    Ok(())
}
