//! The conditional updates that settle a reservation in the ledger: the
//! `RESERVED` → final-state update (with the stock given back on a release),
//! the extension of a `RESERVED` row's time to pay (and its restoring, when a
//! failover lost an extension the Redis mirror proves), clearing the
//! Redis-mirror flag, and the sweep's search for SKUs with expired rows.
//! `ops::lifecycle` decides when; the SQL lives here.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Transaction};

use super::LedgerRow;
use crate::db::due::DUE;
use crate::db::sql_text::SqlText;
use crate::db::{sku, DbError};
use crate::domain::Deduction;
use crate::domain::{RequestId, ReservationStatus, SkuId};
use crate::events::{Event, EventType, Outgoing};

/// The conditional update of one RESERVED row (SKU and row already locked,
/// the SKU with [`sku::lock_noted`]), and its event noted in `out`.
pub async fn finish_locked(
    tx: &mut Transaction<'_>,
    row: &LedgerRow,
    target: ReservationStatus,
    why: Option<&str>,
    now_ms: u64,
    out: &mut Outgoing,
) -> Result<(), DbError> {
    let kind = finish_row_locked(tx, row, target, why, now_ms, out).await?;
    tell(out, kind, row, why, now_ms);
    Ok(())
}

/// Stages the reservation's event of `kind` for `row`, if `out` wants that
/// type, with the SKU's available stock as the transaction leaves it.
fn tell(out: &mut Outgoing, kind: EventType, row: &LedgerRow, why: Option<&str>, now_ms: u64) {
    if out.wants(kind) {
        let facts = Deduction::from(&row.to_reservation());
        let available = out.available(row.sku_id);
        out.push(Event::reservation(kind, &facts, available, why, now_ms));
    }
}

/// [`finish_locked`] without the reservation's event: a line of an order,
/// whose change the order's one event tells (`ops::lifecycle::order`).
/// The stock given back is still noted in `out`. Returns the event type the
/// change is (`confirmed` or `released`).
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
    tx.exec_drop(
        "UPDATE stock_deduct_idempotent
         SET status = ?, reason = ?, finished_at_ms = ?, redis_pending = 1
         WHERE sku_id = ? AND deduct_request_id = ? AND status = 'RESERVED'",
        (
            target.as_str(),
            why,
            now_ms,
            row.sku_id.get(),
            row.request_id.as_str(),
        ),
    )
    .await?;
    assert_eq!(tx.affected_rows(), 1, "the row is locked and was RESERVED");
    Ok(if target == ReservationStatus::Released {
        sku::give_back(tx, row.sku_id, i64::from(row.count)).await?;
        out.moved(row.sku_id, i64::from(row.count), 0);
        EventType::Released
    } else {
        EventType::Confirmed
    })
}

/// [`finish_locked`] for many `RESERVED` rows of one SKU (SKU and rows
/// locked): one conditional update of them all and one give-back of their
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
    let mut sql = SqlText::new("UPDATE stock_deduct_idempotent SET status = ");
    sql.constant(target.as_str()).raw(", reason = ");
    match why {
        Some(why) => sql.constant(why),
        None => sql.null(),
    };
    sql.raw(", finished_at_ms = ")
        .int(now_ms)
        .raw(", redis_pending = 1 WHERE sku_id = ")
        .int(sku_id.get())
        .raw(" AND status = 'RESERVED' AND deduct_request_id IN (")
        .request_ids(rows.iter().map(|r| &r.request_id))
        .raw(")");
    tx.query_drop(sql.finish()).await?;
    assert_eq!(
        tx.affected_rows(),
        rows.len() as u64,
        "the rows are locked and were RESERVED"
    );
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

/// Moves a locked `RESERVED` row's `expires_at_ms` by `by_ms`, unless it had
/// `max` extensions already. Returns the row's extensions now, or `None`
/// when it did not move. The SKU and the row are locked (ledger lock
/// protocol), so only the count can refuse it.
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
    tx.exec_drop(
        "UPDATE stock_deduct_idempotent
         SET expires_at_ms = expires_at_ms + ?, extensions = extensions + 1
         WHERE sku_id = ? AND deduct_request_id = ? AND status = 'RESERVED'
           AND extensions < ?",
        (by_ms, row.sku_id.get(), row.request_id.as_str(), max),
    )
    .await?;
    if tx.affected_rows() != 1 {
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

/// Moves a `RESERVED` row to the time and count of extensions its Redis
/// mirror proves (MySQL lost the commit of the difference), when the row has
/// fewer extensions and an earlier time; no lock (one conditional update).
/// Whether the row moved: the guards make it a no-op for anything else.
pub async fn restore_extension(
    conn: &mut Conn,
    sku_id: SkuId,
    request_id: &RequestId,
    expires_at_ms: u64,
    extensions: u32,
) -> Result<bool, DbError> {
    conn.exec_drop(
        "UPDATE stock_deduct_idempotent SET expires_at_ms = ?, extensions = ?
         WHERE sku_id = ? AND deduct_request_id = ? AND status = 'RESERVED'
           AND extensions < ? AND expires_at_ms < ?",
        (
            expires_at_ms,
            extensions,
            sku_id.get(),
            request_id.as_str(),
            extensions,
            expires_at_ms,
        ),
    )
    .await?;
    Ok(conn.affected_rows() == 1)
}

/// Moves a `RESERVED` line of an order to the order's restored time and
/// count of extensions, in the transaction that restored the order row
/// (`orders::restore_extension_locked`, whose guards decided it).
pub async fn restore_line_extension(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    order_id: &RequestId,
    expires_at_ms: u64,
    extensions: u32,
) -> Result<(), DbError> {
    tx.exec_drop(
        "UPDATE stock_deduct_idempotent SET expires_at_ms = ?, extensions = ?
         WHERE sku_id = ? AND deduct_request_id = ? AND status = 'RESERVED'",
        (expires_at_ms, extensions, sku_id.get(), order_id.as_str()),
    )
    .await?;
    Ok(())
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

/// SKUs holding `RESERVED` rows that expired before `cutoff_ms`, at most `limit`.
/// Order lines are left out here and in the sweep's other reads: a line is
/// released with its whole order, never alone (docs/architecture.md, "Orders").
pub async fn skus_with_expired<Q: Queryable>(
    q: &mut Q,
    cutoff_ms: u64,
    limit: usize,
) -> Result<Vec<u64>, DbError> {
    let skus = q
        .exec(
            format!(
                "SELECT DISTINCT sku_id FROM stock_deduct_idempotent
                 WHERE status = 'RESERVED' AND {DUE} AND order_line = 0 LIMIT {limit}"
            ),
            (cutoff_ms,),
        )
        .await?;
    Ok(skus)
}

/// Request ids of one SKU's `RESERVED` rows that expired before `cutoff_ms`,
/// at most `limit`, without locking them: the sweep first checks their Redis
/// mirrors for a confirm MySQL lost (see `ops::sweep`).
pub async fn expired_ids<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    cutoff_ms: u64,
    limit: usize,
) -> Result<Vec<String>, DbError> {
    let ids = q
        .exec(
            format!(
                "SELECT deduct_request_id FROM stock_deduct_idempotent
                 WHERE sku_id = ? AND status = 'RESERVED' AND {DUE} AND order_line = 0
                 ORDER BY expires_at_ms LIMIT {limit}"
            ),
            (sku_id.get(), cutoff_ms),
        )
        .await?;
    Ok(ids)
}
