//! The invariant check's MySQL-only checks (invariants 1, 2, 6 and 8), run in one
//! read-only consistent snapshot so they agree with each other. The queries
//! are `db::invariants`'s; this file turns their rows into check results.

use super::{Checks, InvariantCheckError};
use super::{BUYER_LIMIT, EXPIRED_RELEASED, MYSQL_CONSERVATION, MYSQL_NON_NEGATIVE};
use crate::db::invariants::{self as reads, SkuFacts};
use crate::db::DbError;
use crate::domain::SkuId;
use crate::resources::Resources;

/// Slack on top of `closer.grace_ms + closer.sweep_interval_ms` before an
/// unreleased expired reservation is a violation: a sweep pass itself takes
/// time, and a closer restart costs a few seconds.
pub(super) const EXPIRY_MARGIN_MS: u64 = 10_000;

/// Runs the MySQL-only checks and returns the SKUs to check across stores.
pub(super) async fn global_checks(
    res: &Resources,
    skus: &[SkuId],
    now_ms: u64,
    checks: &mut Checks,
) -> Result<Vec<SkuFacts>, InvariantCheckError> {
    let mut conn = res.db.conn().await?;
    let mut tx = reads::begin_snapshot(&mut conn).await?;
    let facts = reads::sku_facts(&mut tx, skus).await?;
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
    let (count, rows) = reads::buyers_over_limit(&mut tx, skus, super::DETAILS_MAX).await?;
    let mut details = rows.into_iter().map(|(sku, user, units, limit)| {
        format!("sku {sku} user {user}: {units} live units > limit_per_user {limit}")
    });
    for _ in 0..count {
        checks.one(BUYER_LIMIT, || details.next().unwrap_or_default());
    }
    let closer = &res.settings.closer;
    let slack_ms = closer.grace_ms + closer.sweep_interval_ms + EXPIRY_MARGIN_MS;
    let cutoff_ms = now_ms.saturating_sub(slack_ms);
    let (count, rows) =
        reads::expired_unreleased(&mut tx, skus, cutoff_ms, super::DETAILS_MAX).await?;
    let mut details = rows.into_iter().map(|(sku, rid, user, expires_ms)| {
        let expired = crate::clock::rfc3339_ms(expires_ms);
        format!("sku {sku} request {rid} user {user}: RESERVED, expired at {expired}, not released")
    });
    for _ in 0..count {
        checks.one(EXPIRED_RELEASED, || details.next().unwrap_or_default());
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(facts)
}
