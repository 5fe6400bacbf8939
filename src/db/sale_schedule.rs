//! What the reconciler has done for each SKU's sale window
//! (`sql/0012_sale_schedule.sql`): warmed it for an opening, told the
//! opening, told the closing. Apart from `sale.rs` (the terms an admin sets)
//! because only the reconciler's schedule reads and writes these markers.
//!
//! Why markers in MySQL rather than in the reconciler's memory: a restart,
//! or a second reconciler, must neither warm again nor tell an opening
//! twice. Each marker holds the moment (the opening or closing, epoch ms)
//! it was done for, so a window moved before it opens is done again; it is
//! flipped by a conditional UPDATE in the transaction that stages the
//! event, so of two reconcilers only the one whose UPDATE changed the row
//! tells it.

use mysql_async::prelude::Queryable;

use super::DbError;
use crate::domain::SkuId;
use crate::events::Outgoing;

/// One SKU's window as the schedule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub sku_id: SkuId,
    pub opens_ms: i64,
    pub closes_ms: Option<i64>,
}

/// What was done for a window, each marker naming the moment it was done for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// `sale_warmed_for_ms`: warmed and checked for this opening.
    Warmed,
    /// `sale_opened_told_ms`: this opening told.
    OpenedTold,
    /// `sale_closed_told_ms`: this closing told.
    ClosedTold,
}

impl Marker {
    fn column(self) -> &'static str {
        match self {
            Self::Warmed => "sale_warmed_for_ms",
            Self::OpenedTold => "sale_opened_told_ms",
            Self::ClosedTold => "sale_closed_told_ms",
        }
    }

    /// The column of the moment the marker is about.
    fn moment(self) -> &'static str {
        match self {
            Self::Warmed | Self::OpenedTold => "sale_opens_ms",
            Self::ClosedTold => "sale_closes_ms",
        }
    }
}

type RawWindow = (u64, i64, Option<i64>);

fn windows(rows: Vec<RawWindow>) -> Vec<Window> {
    (rows.into_iter())
        .filter_map(|(id, opens_ms, closes_ms)| {
            Some(Window {
                sku_id: SkuId::new(id).ok()?,
                opens_ms,
                closes_ms,
            })
        })
        .collect()
}

/// The windows of the SKUs `rest` selects (its `WHERE`, `ORDER BY` and
/// `LIMIT`, bound to `params`).
async fn select_windows(
    db: &super::Db,
    rest: String,
    params: (i64, i64),
) -> Result<Vec<Window>, DbError> {
    let rows: Vec<RawWindow> = db
        .bounded(async {
            let mut conn = db.conn().await?;
            let sql = format!("SELECT sku_id, sale_opens_ms, sale_closes_ms FROM sku_stock {rest}");
            Ok(conn.exec(sql, params).await?)
        })
        .await?;
    Ok(windows(rows))
}

/// SKUs whose sale opens in `(now_ms, now_ms + lead_ms]` and that were not
/// warmed for that opening, soonest first, at most `limit`.
pub async fn due_warmups(
    db: &super::Db,
    now_ms: i64,
    lead_ms: i64,
    limit: usize,
) -> Result<Vec<Window>, DbError> {
    let rest = format!(
        "WHERE sale_opens_ms > ? AND sale_opens_ms <= ?
           AND NOT (sale_warmed_for_ms <=> sale_opens_ms)
         ORDER BY sale_opens_ms, sku_id LIMIT {limit}"
    );
    select_windows(db, rest, (now_ms, now_ms + lead_ms)).await
}

/// SKUs whose opening or closing is at or before `now_ms` and not yet
/// told, by SKU id, at most `limit`.
pub async fn due_tellings(
    db: &super::Db,
    now_ms: i64,
    limit: usize,
) -> Result<Vec<Window>, DbError> {
    let rest = format!(
        "WHERE (sale_opens_ms <= ? AND NOT (sale_opened_told_ms <=> sale_opens_ms))
            OR (sale_closes_ms <= ? AND NOT (sale_closed_told_ms <=> sale_closes_ms))
         ORDER BY sku_id LIMIT {limit}"
    );
    select_windows(db, rest, (now_ms, now_ms)).await
}

/// Sets `marker` for `at_ms` if the SKU's moment is still `at_ms` and the
/// marker is not already set for it, staging `events` in the same
/// transaction only then. True when this call flipped it (and staged).
pub async fn mark(
    db: &super::Db,
    sku: SkuId,
    marker: Marker,
    at_ms: i64,
    events: Outgoing,
    time_ms: u64,
) -> Result<bool, DbError> {
    db.bounded(async {
        let mut conn = db.conn().await?;
        let mut tx = conn.start_transaction(super::ledger::tx_opts()).await?;
        let sql = format!(
            "UPDATE sku_stock SET {col} = {moment}
             WHERE sku_id = ? AND {moment} = ? AND NOT ({col} <=> {moment})",
            col = marker.column(),
            moment = marker.moment()
        );
        tx.exec_drop(sql, (sku.get(), at_ms)).await?;
        let flipped = tx.affected_rows() == 1;
        if flipped {
            super::event_outbox::stage(&mut tx, events, time_ms).await?;
        }
        tx.commit().await?;
        Ok(flipped)
    })
    .await
}
