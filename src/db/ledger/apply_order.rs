//! The consumer's apply of whole orders (docs/architecture.md, "Orders"):
//! inside the batch transaction, after the batch's single deductions, each
//! order is fitted line by line against its SKU rows (locked by the batch
//! already, in ascending id order) and the buyer's live units. Every line
//! fits: every line `RESERVED`, stock taken, the order row `RESERVED`. One
//! line does not: every line `REJECTED` (that one with its reason, the
//! others `ORDER_REJECTED`), nothing taken, the order row `REJECTED` with
//! the reason and the SKU. No partial order is ever live in MySQL.
//!
//! Any one line's deduction names the whole order (`Deduction::order`), so
//! the batch expands it into every line first ([`expand`]): an order is
//! applied whole whichever of its messages (the api's, a relay's republish of
//! one line's entry) arrives first; the later ones are duplicates.

use std::collections::BTreeMap;

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::insert::{insert_rows, note_inserted, NewRow};
use super::{reason, BatchReport};
use crate::clock::unix_ms;
use crate::db::sku;
use crate::db::DbError;
use crate::domain::{Deduction, RequestId, ReservationStatus};
use crate::events::Outgoing;

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
                    Deduction::of_order(
                        &msg.request_id,
                        msg.user_id,
                        lines,
                        msg.created_ms,
                        msg.expires_ms,
                    )
                });
            }
        }
    }
    (singles, orders)
}

/// Applies one order's lines (sorted by SKU id; their SKU rows locked).
pub(super) async fn apply_order(
    tx: &mut Transaction<'_>,
    lines: &[Deduction],
    report: &mut BatchReport,
    out: &mut Outgoing,
) -> Result<(), DbError> {
    let Some(first) = lines.first() else {
        return Ok(());
    };
    if order_known(tx, &first.request_id).await? {
        report.duplicates += lines.len();
        return Ok(());
    }
    let mut failed: Option<(&Deduction, &'static str)> = None;
    let mut fresh = Vec::with_capacity(lines.len());
    for line in lines {
        if line_known(tx, line).await? {
            // The id already holds a row of this SKU (a single reservation of
            // the same id): the order cannot be applied whole.
            report.duplicates += 1;
            failed.get_or_insert((line, reason::ORDER_REJECTED));
            continue;
        }
        fresh.push(line);
        if failed.is_none() {
            if let Some(why) = misfit(tx, line, out).await? {
                failed = Some((line, why));
            }
        }
    }
    let rows: Vec<NewRow> = match failed {
        None => {
            for line in &fresh {
                let took = sku::take(tx, line.sku_id, i64::from(line.count)).await?;
                assert!(
                    took,
                    "the SKU row is locked and the fit was computed under the lock"
                );
                report.applied += 1;
            }
            fresh
                .iter()
                .map(|l| (*l, ReservationStatus::Reserved, None))
                .collect()
        }
        Some((failing, why)) => fresh
            .iter()
            .map(|l| {
                let why = if l.sku_id == failing.sku_id {
                    why
                } else {
                    reason::ORDER_REJECTED
                };
                report.rejected.push(((*l).clone(), why));
                (*l, ReservationStatus::Rejected, Some(why))
            })
            .collect(),
    };
    note_inserted(out, &rows, unix_ms());
    insert_rows(tx, &rows).await?;
    insert_order(tx, first, failed).await
}

/// Why `line` cannot be applied now, if it cannot: the SKU unknown to
/// MySQL, the buyer's `limit_per_user` (single reservations and order lines
/// together), or the stock (Redis admitted more than MySQL has).
async fn misfit(
    tx: &mut Transaction<'_>,
    line: &Deduction,
    out: &mut Outgoing,
) -> Result<Option<&'static str>, DbError> {
    let Some(row) = sku::lock_noted(tx, line.sku_id, out).await? else {
        return Ok(Some(reason::UNKNOWN_SKU));
    };
    let held: Option<i64> = tx
        .exec_first(
            "SELECT CAST(COALESCE(SUM(deduct_count), 0) AS SIGNED) FROM stock_deduct_idempotent
             WHERE sku_id = ? AND user_id = ? AND status IN ('RESERVED', 'CONFIRMED')",
            (line.sku_id.get(), line.user_id.get()),
        )
        .await?;
    let count = i64::from(line.count);
    Ok(
        if held.unwrap_or(0) + count > i64::from(row.limit_per_user) {
            Some(reason::LIMIT_EXCEEDED)
        } else if row.available_stock < count {
            Some(reason::OVER_ADMITTED)
        } else {
            None
        },
    )
}

async fn order_known(tx: &mut Transaction<'_>, order_id: &RequestId) -> Result<bool, DbError> {
    let found: Option<u8> = tx
        .exec_first(
            "SELECT 1 FROM orders WHERE order_id = ? FOR UPDATE",
            (order_id.as_str(),),
        )
        .await?;
    Ok(found.is_some())
}

async fn line_known(tx: &mut Transaction<'_>, line: &Deduction) -> Result<bool, DbError> {
    let found: Option<u8> = tx
        .exec_first(
            "SELECT 1 FROM stock_deduct_idempotent WHERE sku_id = ? AND deduct_request_id = ?",
            (line.sku_id.get(), line.request_id.as_str()),
        )
        .await?;
    Ok(found.is_some())
}

/// The order row: `RESERVED`, or `REJECTED` with the first failing line's
/// reason and SKU.
async fn insert_order(
    tx: &mut Transaction<'_>,
    first: &Deduction,
    failed: Option<(&Deduction, &'static str)>,
) -> Result<(), DbError> {
    let lines = first
        .order
        .as_ref()
        .map(|l| l.encode())
        .expect("an order line names its order");
    let (status, why, failed_sku) = match failed {
        None => (ReservationStatus::Reserved, None, None),
        Some((line, why)) => (
            ReservationStatus::Rejected,
            Some(why),
            Some(line.sku_id.get()),
        ),
    };
    tx.exec_drop(
        "INSERT INTO orders (order_id, user_id, order_lines, status, reason, failed_sku_id,
           reserved_at_ms, expires_at_ms)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            first.request_id.as_str(),
            first.user_id.get(),
            lines,
            status.as_str(),
            why,
            failed_sku,
            first.created_ms,
            first.expires_ms,
        ),
    )
    .await?;
    Ok(())
}
