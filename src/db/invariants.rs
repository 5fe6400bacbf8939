//! The invariant check's MySQL reads (contract §10): per-SKU facts, buyers over their limit,
//! expired reservations still held, and the paged ledger readers the
//! cross-store checks walk. The SQL lives here with the other ledger queries;
//! `ops::invariants` decides what the rows mean.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use mysql_async::{Params, Value};

use super::due::DUE;
pub use super::ledger::snapshot::begin_snapshot;
use super::DbError;
use crate::domain::{ReservationStatus, SkuId};

/// Live statuses, as SQL.
const LIVE: &str = "('RESERVED', 'CONFIRMED')";

/// What MySQL holds for one SKU.
#[derive(Debug, Clone)]
pub struct SkuFacts {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub available_stock: i64,
    pub live_units: i64,
}

/// `AND <column> IN (?, ...)` for a SKU filter (nothing when checking all).
fn sku_filter(column: &str, skus: &[SkuId]) -> (String, Vec<Value>) {
    if skus.is_empty() {
        return (String::new(), Vec::new());
    }
    let marks = vec!["?"; skus.len()].join(", ");
    let params = skus.iter().map(|s| Value::from(s.get())).collect();
    (format!(" AND {column} IN ({marks})"), params)
}

/// Each SKU's stock row and its live ledger units, in SKU order.
pub async fn sku_facts<Q: Queryable>(q: &mut Q, skus: &[SkuId]) -> Result<Vec<SkuFacts>, DbError> {
    let (filter, params) = sku_filter("s.sku_id", skus);
    let sql = format!(
        "SELECT s.sku_id, s.total_stock, s.available_stock,
                CAST(COALESCE(SUM(l.deduct_count), 0) AS SIGNED)
         FROM sku_stock s
         LEFT JOIN stock_deduct_idempotent l
           ON l.sku_id = s.sku_id AND l.status IN {LIVE}
         WHERE 1 = 1{filter}
         GROUP BY s.sku_id, s.total_stock, s.available_stock
         ORDER BY s.sku_id"
    );
    let rows: Vec<(u64, i64, i64, i64)> = q.exec(sql, Params::Positional(params)).await?;
    Ok(rows
        .into_iter()
        .filter_map(|(sku, total, available, live)| {
            Some(SkuFacts {
                sku_id: SkuId::new(sku).ok()?,
                total_stock: total,
                available_stock: available,
                live_units: live,
            })
        })
        .collect())
}

/// Invariant 6, in one `GROUP BY ... HAVING`: how many (SKU, buyer) pairs hold
/// more live units than the SKU's `limit_per_user`, and the first `first_max`
/// of them as `(sku, user, units, limit)`.
pub async fn buyers_over_limit<Q: Queryable>(
    q: &mut Q,
    skus: &[SkuId],
    first_max: usize,
) -> Result<(u64, Vec<(u64, u64, i64, u32)>), DbError> {
    let (filter, params) = sku_filter("l.sku_id", skus);
    let over = format!(
        "SELECT l.sku_id, l.user_id, CAST(SUM(l.deduct_count) AS SIGNED) AS units,
                s.limit_per_user
         FROM stock_deduct_idempotent l JOIN sku_stock s ON s.sku_id = l.sku_id
         WHERE l.status IN {LIVE}{filter}
         GROUP BY l.sku_id, l.user_id, s.limit_per_user
         HAVING units > s.limit_per_user"
    );
    let count: Option<u64> = q
        .exec_first(
            format!("SELECT COUNT(*) FROM ({over}) AS o"),
            Params::Positional(params.clone()),
        )
        .await?;
    let count = count.unwrap_or(0);
    if count == 0 {
        return Ok((0, Vec::new()));
    }
    let first = format!("{over} ORDER BY l.sku_id, l.user_id LIMIT {first_max}");
    let rows = q.exec(first, Params::Positional(params)).await?;
    Ok((count, rows))
}

/// Invariant 8: how many `RESERVED` rows expired before `cutoff_ms`, and the
/// first `first_max` of them as `(sku, request_id, user, expires_ms)`.
pub async fn expired_unreleased<Q: Queryable>(
    q: &mut Q,
    skus: &[SkuId],
    cutoff_ms: u64,
    first_max: usize,
) -> Result<(u64, Vec<(u64, String, u64, u64)>), DbError> {
    let (filter, sku_params) = sku_filter("sku_id", skus);
    let mut params = vec![Value::from(cutoff_ms)];
    params.extend(sku_params);
    let from = format!(
        "FROM stock_deduct_idempotent
         WHERE status = 'RESERVED' AND {DUE}{filter}"
    );
    let count: Option<u64> = q
        .exec_first(
            format!("SELECT COUNT(*) {from}"),
            Params::Positional(params.clone()),
        )
        .await?;
    let count = count.unwrap_or(0);
    if count == 0 {
        return Ok((0, Vec::new()));
    }
    let first = format!(
        "SELECT sku_id, deduct_request_id, user_id, expires_at_ms {from}
         ORDER BY expires_at_ms LIMIT {first_max}"
    );
    let rows = q.exec(first, Params::Positional(params)).await?;
    Ok((count, rows))
}

/// One live ledger row.
#[derive(Debug, Clone)]
pub struct LiveRow {
    pub request_id: String,
    pub user_id: u64,
    pub count: i64,
    pub status: ReservationStatus,
    pub reserved_at_ms: u64,
}

/// Live rows of a SKU with request ids after `after`, in id order.
pub async fn live_rows_page<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    after: &str,
    limit: usize,
) -> Result<Vec<LiveRow>, DbError> {
    let sql = format!(
        "SELECT deduct_request_id, user_id, CAST(deduct_count AS SIGNED), status, reserved_at_ms
         FROM stock_deduct_idempotent
         WHERE sku_id = ? AND status IN {LIVE} AND deduct_request_id > ?
         ORDER BY deduct_request_id LIMIT {limit}"
    );
    let rows: Vec<(String, u64, i64, String, u64)> = q.exec(sql, (sku_id.get(), after)).await?;
    Ok(rows
        .into_iter()
        .map(
            |(request_id, user_id, count, status, reserved_at_ms)| LiveRow {
                request_id,
                user_id,
                count,
                status: ReservationStatus::parse(&status).unwrap_or(ReservationStatus::Reserved),
                reserved_at_ms,
            },
        )
        .collect())
}

/// A buyer's live units of one SKU and their latest reservation time.
#[derive(Debug, Clone)]
pub struct BuyerUnits {
    pub user_id: u64,
    pub units: i64,
    pub last_reserved_ms: u64,
}

/// Buyers of a SKU with user ids after `after`, in id order.
pub async fn buyers_page<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    after: u64,
    limit: usize,
) -> Result<Vec<BuyerUnits>, DbError> {
    let sql = format!(
        "SELECT user_id, CAST(SUM(deduct_count) AS SIGNED), MAX(reserved_at_ms)
         FROM stock_deduct_idempotent
         WHERE sku_id = ? AND status IN {LIVE} AND user_id > ?
         GROUP BY user_id ORDER BY user_id LIMIT {limit}"
    );
    let rows: Vec<(u64, i64, u64)> = q.exec(sql, (sku_id.get(), after)).await?;
    Ok(rows
        .into_iter()
        .map(|(user_id, units, last_reserved_ms)| BuyerUnits {
            user_id,
            units,
            last_reserved_ms,
        })
        .collect())
}

/// Live units of each of `users` right now (outside any snapshot).
pub async fn live_units_of<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    users: &[u64],
) -> Result<HashMap<u64, i64>, DbError> {
    if users.is_empty() {
        return Ok(Default::default());
    }
    let marks = vec!["?"; users.len()].join(", ");
    let sql = format!(
        "SELECT user_id, CAST(SUM(deduct_count) AS SIGNED) FROM stock_deduct_idempotent
         WHERE sku_id = ? AND status IN {LIVE} AND user_id IN ({marks}) GROUP BY user_id"
    );
    let mut params = vec![Value::from(sku_id.get())];
    params.extend(users.iter().map(|u| Value::from(*u)));
    let rows: Vec<(u64, i64)> = q.exec(sql, Params::Positional(params)).await?;
    Ok(rows.into_iter().collect())
}
