//! What settling a ledger row does beyond its one statement: the stock
//! given back on a release and the events, the extension's count read
//! back, many rows of one SKU released at once, and the Redis-mirror flag
//! cleared. The statements that decide a hold, a ledger row's and an order
//! row's alike, live in `db::holds`; `ops::lifecycle` decides when.

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::LedgerRow;
use crate::db::holds::{self, HoldKey};
use crate::db::sql_text::SqlText;
use crate::db::{sku, DbError};
use crate::domain::Deduction;
use crate::domain::{RequestId, ReservationStatus, SkuId};
use crate::events::{Event, EventType, Outgoing};

/// Stages a single reservation's event of `kind` for `row`, if `out` wants
/// that type, with the SKU's available stock as the transaction leaves it
/// (an order's line tells nothing: its order's one event does).
pub fn tell(out: &mut Outgoing, kind: EventType, row: &LedgerRow, why: Option<&str>, now_ms: u64) {
    if out.wants(kind) {
        let facts = Deduction::from(&row.to_reservation());
        let available = out.available(row.sku_id);
        out.push(Event::reservation(kind, &facts, available, why, now_ms));
    }
}

/// The conditional update of one `RESERVED` ledger row (SKU and row already
/// locked, the SKU with [`sku::lock_noted`]), the stock given back on a
/// release and noted in `out`. Returns the event type the change is
/// (`confirmed` or `released`) for the caller to tell: a single reservation
/// its own ([`tell`]), an order one for all its lines (`ops::lifecycle::order`).
pub async fn finish_row_locked(
    tx: &mut Transaction<'_>,
    row: &LedgerRow,
    target: ReservationStatus,
    why: Option<&str>,
    now_ms: u64,
    out: &mut Outgoing,
) -> Result<EventType, DbError> {
    // Programmer error, not an operating one: only RESERVED has exits.
    assert!(
        row.status.can_become(target),
        "{:?} -> {target:?} is not a transition",
        row.status
    );
    holds::finish_locked(tx, key(row), target, why, now_ms).await?;
    Ok(if target == ReservationStatus::Released {
        sku::give_back(tx, row.sku_id, i64::from(row.count)).await?;
        out.moved(row.sku_id, i64::from(row.count), 0);
        EventType::Released
    } else {
        EventType::Confirmed
    })
}

/// [`finish_row_locked`] and [`tell`] for many `RESERVED` single
/// reservations of one SKU (SKU and rows locked): one conditional update of
/// them all ([`holds::finish_many_locked`]) and one give-back of their
/// units, each row's event noted in `out` in order, as one call each would.
pub async fn finish_many_locked(
    tx: &mut Transaction<'_>,
    rows: &[LedgerRow],
    target: ReservationStatus,
    why: Option<&'static str>,
    now_ms: u64,
    out: &mut Outgoing,
) -> Result<(), DbError> {
    let Some(first) = rows.first() else {
        return Ok(());
    };
    let sku_id = first.sku_id;
    for row in rows {
        // Programmer errors, not operating ones.
        assert_eq!(row.sku_id, sku_id, "one SKU per batch");
        assert!(
            row.status.can_become(target),
            "{:?} -> {target:?}",
            row.status
        );
    }
    let ids: Vec<&RequestId> = rows.iter().map(|r| &r.request_id).collect();
    holds::finish_many_locked(tx, sku_id, &ids, target, why, now_ms).await?;
    let kind = if target == ReservationStatus::Released {
        let units: i64 = rows.iter().map(|r| i64::from(r.count)).sum();
        sku::give_back(tx, sku_id, units).await?;
        EventType::Released
    } else {
        EventType::Confirmed
    };
    for row in rows {
        if kind == EventType::Released {
            out.moved(sku_id, i64::from(row.count), 0);
        }
        tell(out, kind, row, why, now_ms);
    }
    Ok(())
}

/// [`holds::extend_locked`] of a ledger row, and the row's extensions now
/// (read back: a ledger row as read carries no count), or `None` when it
/// did not move.
pub async fn extend_locked(
    tx: &mut Transaction<'_>,
    row: &LedgerRow,
    by_ms: u64,
    max: u32,
) -> Result<Option<u32>, DbError> {
    assert_eq!(
        row.status,
        ReservationStatus::Reserved,
        "only a RESERVED row has a time to pay"
    );
    if !holds::extend_locked(tx, key(row), by_ms, max).await? {
        return Ok(None);
    }
    let extensions: Option<u32> = tx
        .exec_first(
            "SELECT extensions FROM stock_deduct_idempotent
             WHERE sku_id = ? AND deduct_request_id = ?",
            (row.sku_id.get(), row.request_id.as_str()),
        )
        .await?;
    Ok(extensions)
}

/// The key of a ledger row, for `db::holds`.
fn key(row: &LedgerRow) -> HoldKey<'_> {
    HoldKey::Ledger(row.sku_id, &row.request_id)
}

/// Marks a decided row's Redis mirror as done.
pub async fn clear_redis_pending<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Result<(), DbError> {
    q.exec_drop(
        "UPDATE stock_deduct_idempotent SET redis_pending = 0
         WHERE sku_id = ? AND deduct_request_id = ?",
        (sku_id.get(), request_id.as_str()),
    )
    .await?;
    Ok(())
}

/// [`clear_redis_pending`] for many rows of one SKU, in one statement.
pub async fn clear_redis_pending_many<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    ids: &[RequestId],
) -> Result<(), DbError> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut sql =
        SqlText::new("UPDATE stock_deduct_idempotent SET redis_pending = 0 WHERE sku_id = ");
    sql.int(sku_id.get())
        .raw(" AND deduct_request_id IN (")
        .request_ids(ids)
        .raw(")");
    q.query_drop(sql.finish()).await?;
    Ok(())
}
