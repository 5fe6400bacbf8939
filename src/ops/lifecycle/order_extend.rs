//! A hold while the buyer pays, for a whole order: `POST
//! /v1/orders/{order_id}/extend` moves the order's `expires_at` and every
//! line's by `reservation.extend_secs`, at most `reservation.max_extensions`
//! times, as [`super::extend`] does for one reservation.
//!
//! MySQL decides in one transaction under the order lock protocol of
//! [`super::order`] (the lines' SKU rows ascending, then the order row, then
//! the line rows): the order row's conditional update decides, every line
//! follows it, so an order is never extended on some lines only, and an
//! extension racing the closer's expiry has one winner (the expiry locks the
//! same rows first and finds the later time, `NotYetExpired`). Redis mirrors
//! each line (`extend.lua`) and the order record (`order_extend.lua`)
//! afterwards; a failed mirror changes no decision.

use super::order::applied_or_applies;
use super::{retried, within_query_bound, Extension, LifecycleError};
use crate::db::ledger::{self, settle};
use crate::db::orders::{self, OrderRow};
use crate::db::{event_outbox, sku, Db, DbError};
use crate::domain::{RequestId, ReservationStatus};
use crate::redis::RedisStore;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderExtendOutcome {
    /// Moved: the order row as it is now (new `expires_at_ms`, `extensions`).
    Extended { order: OrderRow },
    /// The order is final (`order.status` says how): nothing to extend.
    Final { order: OrderRow },
    /// It had `max_extensions` extensions already.
    LimitReached { order: OrderRow },
    /// No such order in MySQL or Redis.
    NotFound,
}

/// Extends a whole order: the MySQL decision, then the Redis mirrors.
pub async fn extend_order(
    db: &Db,
    redis: &RedisStore,
    extension: Extension,
    order_id: &RequestId,
    now_ms: u64,
    requester: &crate::domain::Requester,
) -> Result<OrderExtendOutcome, LifecycleError> {
    // Another client's order is not there (contract §6.2).
    if !applied_or_applies(db, redis, order_id, requester).await? {
        return Ok(OrderExtendOutcome::NotFound);
    }
    let decision = retried(|| decide(db, extension, order_id, now_ms));
    let outcome = within_query_bound(db, decision).await?;
    if let OrderExtendOutcome::Extended { order } = &outcome {
        mirror(redis, order).await;
        metrics::counter!("stockd_order_extensions_total").increment(1);
    }
    Ok(outcome)
}

/// Each line's record and the order record take the new time; a failure
/// is logged as an outage (the closer and the sweep read MySQL's time).
async fn mirror(redis: &RedisStore, order: &OrderRow) {
    for line in order.lines.lines() {
        let mirrored = redis
            .reservations()
            .extend(
                line.sku_id,
                &order.order_id,
                order.user_id,
                order.expires_at_ms,
                order.extensions,
            )
            .await;
        if let Err(err) = mirrored {
            crate::health::outage::failed("redis", &err);
        }
    }
    let record = redis
        .orders()
        .extend_record(&order.order_id, order.expires_at_ms, order.extensions)
        .await;
    if let Err(err) = record {
        crate::health::outage::failed("redis", &err);
    }
}

/// One attempt: one transaction under the order lock protocol.
async fn decide(
    db: &Db,
    extension: Extension,
    order_id: &RequestId,
    now_ms: u64,
) -> Result<OrderExtendOutcome, LifecycleError> {
    let mut conn = db.conn().await?;
    let Some(unlocked) = orders::find(&mut conn, order_id).await? else {
        return Ok(OrderExtendOutcome::NotFound);
    };
    let mut tx = conn
        .start_transaction(ledger::tx_opts())
        .await
        .map_err(DbError::from)?;
    let mut out = db.outgoing();
    for line in unlocked.lines.lines() {
        sku::lock_noted(&mut tx, line.sku_id, &mut out).await?;
    }
    let Some(order) = orders::find_for_update(&mut tx, order_id).await? else {
        return Ok(OrderExtendOutcome::NotFound);
    };
    if order.status != ReservationStatus::Reserved {
        return Ok(OrderExtendOutcome::Final { order });
    }
    let Some(extensions) =
        orders::extend_locked(&mut tx, &order, extension.by_ms, extension.max).await?
    else {
        return Ok(OrderExtendOutcome::LimitReached { order });
    };
    for line in order.lines.lines() {
        let row = ledger::find_for_update(&mut tx, line.sku_id, order_id)
            .await?
            .expect("a RESERVED order has a ledger row per line");
        // The lines moved with the order every time, so the order's count bounds them.
        let moved = settle::extend_locked(&mut tx, &row, extension.by_ms, extension.max).await?;
        assert_eq!(moved, Some(extensions), "an order's lines move with it");
    }
    event_outbox::stage(&mut tx, out, now_ms).await?;
    tx.commit().await.map_err(DbError::from)?;
    Ok(OrderExtendOutcome::Extended {
        order: OrderRow {
            expires_at_ms: order.expires_at_ms + extension.by_ms,
            extensions,
            ..order
        },
    })
}
