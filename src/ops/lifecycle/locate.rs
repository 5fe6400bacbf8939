//! The lock step of a single reservation ([`super::SingleHold`]'s
//! `Hold::lock`, for a transition or an extension): find its ledger row and
//! lock it under the ledger lock protocol (the SKU row first, then the
//! ledger row), in a transaction the caller finishes.
//!
//! Order of arrival never matters: a reservation the consumer has not applied
//! yet is applied here first, from its Redis record, exactly as the consumer
//! would (its own transaction, its events told with it: issue 49); a
//! reservation MySQL lost together with its release (the Redis record says
//! RELEASED) is recorded RELEASED (`recovered::record_release`). A record
//! that is a line of an order is never applied or moved as a single
//! reservation: `ORDER_LINE` before anything is written. Nor is another
//! client's reservation (contract §6.2): `NotFound`, from the Redis record
//! before it is applied or recorded, or from the row under its lock.

use super::hold::{Located, Locked, SingleHold};
use super::{recovered, LifecycleError, Transition};
use crate::db::ledger::{self, LedgerRow};
use crate::db::{sku, Conn, Db, DbError, Transaction};
use crate::domain::{Deduction, Requester, Reservation, ReservationStatus};
use crate::events::Outgoing;
use crate::redis::RedisStore;

/// What Redis holds of a reservation the ledger lacks.
enum OnlyInRedis {
    /// Reserved or confirmed: the deduction to apply first.
    Live(Deduction),
    /// Released: MySQL lost both the deduction and the release.
    Released(Reservation),
    /// A line of an order (its record names the order): it is applied and
    /// moved only with its whole order, never as a single reservation.
    OrderLine,
    /// Redis does not know it either.
    Nowhere,
}

/// Finds and locks the ledger row of (`sku_id`, `request_id`) on `conn`.
/// `release_as`: the transition a release recorded from Redis is taken for
/// (`recovered::record_release` names its reason from it and the time).
pub(super) async fn lock<'c>(
    conn: &'c mut Conn,
    db: &Db,
    redis: &RedisStore,
    asked: &SingleHold<'_>,
    requester: &Requester,
    release_as: Transition,
    now_ms: u64,
) -> Result<Located<'c, LedgerRow>, LifecycleError> {
    let (sku_id, request_id) = (asked.sku_id, asked.request_id);
    let known = ledger::find(&mut *conn, sku_id, request_id).await?;
    if known.is_none() {
        match locate_in_redis(redis, asked, requester).await? {
            OnlyInRedis::Live(deduction) => {
                // The consumer is behind: apply the deduction now, in a
                // transaction of its own, exactly as the consumer would — its
                // events and the SKU's crossings told with it — so MySQL's
                // history is the one a consumer first would have written.
                let telling = ledger::Telling::InOutbox;
                ledger::apply_batch_told(db, &[deduction], 0, telling).await?;
            }
            OnlyInRedis::OrderLine => return Ok(Located::OrderLine),
            OnlyInRedis::Released(record) => {
                let row = recovered::record_release(db, &record, release_as, now_ms).await?;
                return Ok(Located::ReleaseRecorded(row));
            }
            OnlyInRedis::Nowhere => return Ok(Located::NotFound),
        }
    }
    let Some((mut tx, out)) = begin_on_sku(db, conn, sku_id).await? else {
        return Ok(Located::NotFound);
    };
    let Some(row) = ledger::find_for_update(&mut tx, sku_id, request_id).await? else {
        return Ok(Located::NotFound);
    };
    if !requester.may_act_on(row.client.as_deref()) {
        // Rolled back: nothing of another client's reservation moves.
        return Ok(Located::NotFound);
    }
    if ledger::is_order_line(&mut tx, sku_id, request_id).await? {
        return Ok(Located::OrderLine);
    }
    Ok(Located::Locked(Locked { tx, row, out }))
}

/// Looks in Redis for a reservation the ledger has no row of.
async fn locate_in_redis(
    redis: &RedisStore,
    asked: &SingleHold<'_>,
    requester: &Requester,
) -> Result<OnlyInRedis, LifecycleError> {
    let records = redis.reservations();
    let Some(record) = records.record(asked.sku_id, asked.request_id).await? else {
        return Ok(OnlyInRedis::Nowhere);
    };
    if !requester.may_act_on(record.reservation.client.as_deref()) {
        return Ok(OnlyInRedis::Nowhere);
    }
    if record.order.is_some() {
        return Ok(OnlyInRedis::OrderLine);
    }
    let r = record.reservation;
    Ok(match r.status {
        // A CONFIRMED record whose row MySQL lost is applied like a
        // reserved one, then confirmed (see the lifecycle's module doc).
        ReservationStatus::Reserved | ReservationStatus::Confirmed => {
            OnlyInRedis::Live(Deduction::from(&r))
        }
        ReservationStatus::Released => OnlyInRedis::Released(r),
        ReservationStatus::Rejected => OnlyInRedis::Nowhere,
    })
}

/// The lock protocol's first step, shared by every ledger decision: a
/// transaction on `conn` with the SKU row locked (`sku::lock_noted`) and the
/// events it will stage. `None` when the SKU does not exist.
pub(super) async fn begin_on_sku<'c>(
    db: &Db,
    conn: &'c mut Conn,
    sku_id: crate::domain::SkuId,
) -> Result<Option<(Transaction<'c>, Outgoing)>, DbError> {
    let mut tx = conn
        .start_transaction(ledger::tx_opts())
        .await
        .map_err(DbError::from)?;
    let mut out = db.outgoing();
    if sku::lock_noted(&mut tx, sku_id, &mut out).await?.is_none() {
        return Ok(None);
    }
    Ok(Some((tx, out)))
}
