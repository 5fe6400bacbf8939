//! The audit's MySQL reads: the checks MySQL answers alone (invariants 1, 2, 6
//! and 8), run in one read-only consistent snapshot so they agree with each
//! other, and the paged ledger readers the cross-store checks use.

use mysql_async::prelude::Queryable;
use mysql_async::{IsolationLevel, Params, TxOpts, Value};

use super::{AuditError, Checks};
use super::{BUYER_LIMIT, EXPIRED_RELEASED, MYSQL_CONSERVATION, MYSQL_NON_NEGATIVE};
use crate::db::DbError;
use crate::domain::{ReservationStatus, SkuId};
use crate::resources::Resources;

/// Slack on top of `closer.grace_ms + closer.sweep_interval_ms` before an
/// unreleased expired reservation is a violation: a sweep pass itself takes
/// time, and a closer restart costs a few seconds.
pub(super) const EXPIRY_MARGIN_MS: u64 = 10_000;

/// Live statuses, as SQL.
const LIVE: &str = "('RESERVED', 'CONFIRMED')";

/// What MySQL holds for one SKU.
#[derive(Debug, Clone)]
pub(super) struct SkuFacts {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub available_stock: i64,
    pub live_units: i64,
}

/// A read-only transaction that sees one consistent snapshot.
pub(super) fn snapshot_opts() -> TxOpts {
    let mut opts = TxOpts::default();
    opts.with_consistent_snapshot(true)
        .with_isolation_level(IsolationLevel::RepeatableRead)
        .with_readonly(true);
    opts
}

/// `AND <column> IN (?, ...)` for a SKU filter (nothing when auditing all).
fn sku_filter(column: &str, skus: &[SkuId]) -> (String, Vec<Value>) {
    if skus.is_empty() {
        return (String::new(), Vec::new());
    }
    let marks = vec!["?"; skus.len()].join(", ");
    let params = skus.iter().map(|s| Value::from(s.get())).collect();
    (format!(" AND {column} IN ({marks})"), params)
}

/// Runs the MySQL-only checks and returns the SKUs to audit across stores.
pub(super) async fn global_checks(
    res: &Resources,
    skus: &[SkuId],
    now_ms: u64,
    checks: &mut Checks,
) -> Result<Vec<SkuFacts>, AuditError> {
    let mut conn = res.db.conn().await?;
    let mut tx = conn.start_transaction(snapshot_opts()).await?;
    let facts = sku_facts(&mut tx, skus).await?;
    for wanted in skus {
        if !facts.iter().any(|f| f.sku_id == *wanted) {
            checks.one(MYSQL_CONSERVATION, || {
                format!("sku {wanted}: no sku_stock row")
            });
        }
    }
    for f in &facts {
        if f.available_stock < 0 {
            checks.one(MYSQL_NON_NEGATIVE, || {
                format!(
                    "sku {}: available_stock {} < 0",
                    f.sku_id, f.available_stock
                )
            });
        }
        if f.live_units > f.total_stock {
            checks.one(MYSQL_NON_NEGATIVE, || {
                format!(
                    "sku {}: live units {} > total_stock {}",
                    f.sku_id, f.live_units, f.total_stock
                )
            });
        }
        if f.total_stock - f.available_stock != f.live_units {
            checks.one(MYSQL_CONSERVATION, || {
                format!(
                    "sku {}: total_stock {} - available_stock {} != live units {}",
                    f.sku_id, f.total_stock, f.available_stock, f.live_units
                )
            });
        }
    }
    buyers_over_limit(&mut tx, skus, checks).await?;
    let closer = &res.settings.closer;
    let slack_ms = closer.grace_ms + closer.sweep_interval_ms + EXPIRY_MARGIN_MS;
    expired_unreleased(&mut tx, skus, now_ms.saturating_sub(slack_ms), checks).await?;
    tx.commit().await?;
    Ok(facts)
}

async fn sku_facts<Q: Queryable>(q: &mut Q, skus: &[SkuId]) -> Result<Vec<SkuFacts>, DbError> {
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

/// Invariant 6, in one `GROUP BY ... HAVING`: buyers whose live units exceed
/// the SKU's `limit_per_user`.
async fn buyers_over_limit<Q: Queryable>(
    q: &mut Q,
    skus: &[SkuId],
    checks: &mut Checks,
) -> Result<(), DbError> {
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
        return Ok(());
    }
    let first = format!(
        "{over} ORDER BY l.sku_id, l.user_id LIMIT {}",
        super::DETAILS_MAX
    );
    let rows: Vec<(u64, u64, i64, u32)> = q.exec(first, Params::Positional(params)).await?;
    let mut details = rows.into_iter().map(|(sku, user, units, limit)| {
        format!("sku {sku} user {user}: {units} live units > limit_per_user {limit}")
    });
    for _ in 0..count {
        checks.one(BUYER_LIMIT, || details.next().unwrap_or_default());
    }
    Ok(())
}

/// Invariant 8: `RESERVED` rows that expired before `cutoff_ms` (expiry plus
/// the closer's grace, sweep period and a margin) are still unreleased.
async fn expired_unreleased<Q: Queryable>(
    q: &mut Q,
    skus: &[SkuId],
    cutoff_ms: u64,
    checks: &mut Checks,
) -> Result<(), DbError> {
    let (filter, sku_params) = sku_filter("sku_id", skus);
    let mut params = vec![Value::from(cutoff_ms)];
    params.extend(sku_params);
    let from = format!(
        "FROM stock_deduct_idempotent
         WHERE status = 'RESERVED' AND expires_at_ms < ?{filter}"
    );
    let count: Option<u64> = q
        .exec_first(
            format!("SELECT COUNT(*) {from}"),
            Params::Positional(params.clone()),
        )
        .await?;
    let count = count.unwrap_or(0);
    if count == 0 {
        return Ok(());
    }
    let first = format!(
        "SELECT sku_id, deduct_request_id, user_id, expires_at_ms {from}
         ORDER BY expires_at_ms LIMIT {}",
        super::DETAILS_MAX
    );
    let rows: Vec<(u64, String, u64, u64)> = q.exec(first, Params::Positional(params)).await?;
    let mut details = rows.into_iter().map(|(sku, rid, user, expires_ms)| {
        let expired = crate::roles::api::views::rfc3339_ms(expires_ms);
        format!("sku {sku} request {rid} user {user}: RESERVED, expired at {expired}, not released")
    });
    for _ in 0..count {
        checks.one(EXPIRED_RELEASED, || details.next().unwrap_or_default());
    }
    Ok(())
}

/// One live ledger row.
#[derive(Debug, Clone)]
pub(super) struct LiveRow {
    pub request_id: String,
    pub user_id: u64,
    pub count: i64,
    pub status: ReservationStatus,
    pub reserved_at_ms: u64,
}

/// Live rows of a SKU with request ids after `after`, in id order.
pub(super) async fn live_rows_page<Q: Queryable>(
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
pub(super) struct BuyerUnits {
    pub user_id: u64,
    pub units: i64,
    pub last_reserved_ms: u64,
}

/// Buyers of a SKU with user ids after `after`, in id order.
pub(super) async fn buyers_page<Q: Queryable>(
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
pub(super) async fn live_units_of<Q: Queryable>(
    q: &mut Q,
    sku_id: SkuId,
    users: &[u64],
) -> Result<std::collections::HashMap<u64, i64>, DbError> {
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
