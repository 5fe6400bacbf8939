//! The invariant check's order checks (docs/architecture.md, "Orders"):
//!
//! - `order_lines_in_ledger`: every line of an order row has its ledger row
//!   (marked `order_line`), and no line row is without its order row.
//! - `order_status_matches`: every line row's status is its order's.
//! - `orders_whole`: no partial order is live in either store: in MySQL, a
//!   live order (`RESERVED`, `CONFIRMED`) has every line live and a final
//!   one none; in Redis, an order record has its lines' records in its own
//!   state (a record still `RESERVED` with a line released, or the other way
//!   round, is half an order), and no order held line by line is left
//!   half held: an intent more than [`INTENT_GRACE`] past its deadline and
//!   not undone means no sweeper is running (`ops/order_sweeper.rs`).
//!
//! MySQL is read in one read-only snapshot; Redis afterwards, and a Redis
//! finding gets a second look at both stores, as the cross-store checks do.

use super::{Checks, InvariantCheckError};
use super::{ORDERS_WHOLE, ORDER_LINES_IN_LEDGER, ORDER_STATUS_MATCHES};
use crate::db::invariants::begin_snapshot;
use crate::db::orders::{self, OrderAudit};
use crate::db::DbError;
use crate::domain::{RequestId, ReservationStatus, SkuId};
use crate::resources::Resources;

/// Runs the order checks over every order with a line on `skus` (every
/// order when empty).
pub(super) async fn check(
    res: &Resources,
    skus: &[SkuId],
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let mut conn = res.db.conn().await?;
    let mut tx = begin_snapshot(&mut conn).await?;
    let audit = orders::audit_all(&mut tx).await?;
    tx.commit().await.map_err(DbError::from)?;
    let wanted = |sku: u64| skus.is_empty() || skus.iter().any(|s| s.get() == sku);
    for (order_id, sku, status) in &audit.orphan_lines {
        if wanted(*sku) {
            checks.one(ORDER_LINES_IN_LEDGER, || {
                format!("order {order_id}: line row of sku {sku} ({status}) without an order row")
            });
        }
    }
    for order in &audit.orders {
        if !order.lines.lines().iter().any(|l| wanted(l.sku_id.get())) {
            continue;
        }
        check_mysql(order, checks);
        check_redis(res, order, checks).await?;
    }
    if skus.is_empty() {
        check_intents(res, checks).await?;
    }
    Ok(())
}

/// How long past its deadline an intent may still be open: the sweeper
/// looks every second, and its undo takes a call per line.
pub const INTENT_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Intents of orders held line by line, open well past their deadline.
async fn check_intents(res: &Resources, checks: &mut Checks) -> Result<(), InvariantCheckError> {
    let grace_ms = INTENT_GRACE.as_millis() as u64;
    for shard in 0..crate::redis::keys::ORDER_SHARDS {
        for order_id in res.redis.orders().due_intents(shard, grace_ms, 100).await? {
            checks.one(ORDERS_WHOLE, || {
                format!(
                    "order {order_id}: held line by line and still open more than {}s past its \
                     deadline (is an api node's order sweeper running?)",
                    INTENT_GRACE.as_secs()
                )
            });
        }
    }
    Ok(())
}

fn check_mysql(order: &OrderAudit, checks: &mut Checks) {
    let id = &order.order_id;
    for line in order.lines.lines() {
        let sku = line.sku_id.get();
        let Some((_, status)) = order.line_rows.iter().find(|(s, _)| *s == sku) else {
            checks.one(ORDER_LINES_IN_LEDGER, || {
                format!("order {id}: no ledger row for its line of sku {sku}")
            });
            continue;
        };
        if status != order.status.as_str() {
            checks.one(ORDER_STATUS_MATCHES, || {
                format!(
                    "order {id} is {}: its line of sku {sku} is {status}",
                    order.status.as_str()
                )
            });
        }
        let line_live = ReservationStatus::parse(status).is_some_and(|s| s.is_live());
        if line_live != order.status.is_live() {
            checks.one(ORDERS_WHOLE, || {
                format!(
                    "order {id} is {} in MySQL: its line of sku {sku} is {status}",
                    order.status.as_str()
                )
            });
        }
    }
    for (sku, status) in &order.line_rows {
        if order
            .lines
            .line_of(SkuId::new(*sku).expect("valid sku"))
            .is_none()
        {
            checks.one(ORDER_LINES_IN_LEDGER, || {
                format!("order {id}: line row of sku {sku} ({status}) is not one of its lines")
            });
        }
    }
}

/// An order record and its line records in Redis, where they still live
/// (records end `redis.reservation_retention_secs` after the time to pay).
async fn check_redis(
    res: &Resources,
    order: &OrderAudit,
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let Ok(order_id) = RequestId::parse(&order.order_id) else {
        return Ok(());
    };
    for _look in 0..2 {
        match half_in_redis(res, &order_id, order).await? {
            None => return Ok(()),
            Some(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
    if let Some(detail) = half_in_redis(res, &order_id, order).await? {
        checks.one(ORDERS_WHOLE, || detail);
    }
    Ok(())
}

/// A line record whose liveness differs from the order record's.
async fn half_in_redis(
    res: &Resources,
    order_id: &RequestId,
    order: &OrderAudit,
) -> Result<Option<String>, InvariantCheckError> {
    let Some(record) = res.redis.orders().record(order_id).await? else {
        return Ok(None);
    };
    for line in order.lines.lines() {
        let held = res
            .redis
            .reservations()
            .reservation(line.sku_id, order_id)
            .await?;
        let Some(held) = held else {
            continue;
        };
        if held.status.is_live() != record.status.is_live() {
            return Ok(Some(format!(
                "order {order_id} is {} in Redis: its line of sku {} is {}",
                record.status.as_str(),
                line.sku_id,
                held.status.as_str()
            )));
        }
    }
    Ok(None)
}
