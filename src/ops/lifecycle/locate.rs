//! The first step of every decision about one reservation (a transition, an
//! extension): find its ledger row and lock it under the ledger lock protocol
//! (the SKU row first, then the ledger row), in a transaction the caller
//! finishes.
//!
//! Order of arrival never matters: a reservation the consumer has not applied
//! yet is applied here first, from its Redis record, exactly as the consumer
//! would; a reservation MySQL lost together with its release (the Redis record
//! says RELEASED) is recorded RELEASED (`recovered::record_release`).

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Transaction};

use super::{recovered, LifecycleError, Transition};
use crate::db::ledger::{self, LedgerRow};
use crate::db::{sku, Db, DbError};
use crate::domain::{Deduction, RequestId, Reservation, ReservationStatus, SkuId};
use crate::events::Outgoing;
use crate::redis::RedisStore;

/// A reservation's ledger row, locked in `tx`; the caller commits.
pub(super) struct Locked<'c> {
    pub tx: Transaction<'c>,
    /// The row as it is under the lock.
    pub row: LedgerRow,
    /// The events of the transaction so far (a deduction applied here).
    pub out: Outgoing,
}

/// Where the reservation was found.
pub(super) enum Located<'c> {
    Locked(Locked<'c>),
    /// MySQL lost the reservation with its release; recorded RELEASED now.
    ReleaseRecorded(LedgerRow),
    /// A line of an order: it moves only with its whole order
    /// (`lifecycle::order`), never alone.
    OrderLine,
    /// No such reservation in MySQL or Redis (or no such SKU in MySQL).
    NotFound,
}

/// What Redis holds of a reservation the ledger lacks.
enum OnlyInRedis {
    /// Reserved or confirmed: the deduction to apply first.
    Live(Deduction),
    /// Released: MySQL lost both the deduction and the release.
    Released(Reservation),
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
    sku_id: SkuId,
    request_id: &RequestId,
    release_as: Transition,
    now_ms: u64,
) -> Result<Located<'c>, LifecycleError> {
    let known = ledger::find(&mut *conn, sku_id, request_id).await?;
    let pending_apply = match known {
        Some(_) => None,
        None => match locate_in_redis(redis, sku_id, request_id).await? {
            OnlyInRedis::Live(deduction) => Some(deduction),
            OnlyInRedis::Released(record) => {
                let row = recovered::record_release(db, &record, release_as, now_ms).await?;
                return Ok(Located::ReleaseRecorded(row));
            }
            OnlyInRedis::Nowhere => return Ok(Located::NotFound),
        },
    };
    let mut tx = conn
        .start_transaction(ledger::tx_opts())
        .await
        .map_err(DbError::from)?;
    let mut out = db.outgoing();
    if sku::lock_noted(&mut tx, sku_id, &mut out).await?.is_none() {
        return Ok(Located::NotFound);
    }
    let mut row = ledger::find_for_update(&mut tx, sku_id, request_id).await?;
    if let (None, Some(msg)) = (&row, pending_apply) {
        // The consumer is behind: apply the deduction now, exactly as it would.
        let mut report = ledger::BatchReport::default();
        ledger::apply_sku(&mut tx, sku_id, vec![&msg], &mut report, &mut out).await?;
        row = ledger::find_for_update(&mut tx, sku_id, request_id).await?;
    }
    let Some(row) = row else {
        return Ok(Located::NotFound);
    };
    let order_line: Option<u8> = tx
        .exec_first(
            "SELECT order_line FROM stock_deduct_idempotent
             WHERE sku_id = ? AND deduct_request_id = ?",
            (sku_id.get(), request_id.as_str()),
        )
        .await
        .map_err(DbError::from)?;
    if order_line == Some(1) {
        return Ok(Located::OrderLine);
    }
    Ok(Located::Locked(Locked { tx, row, out }))
}

/// Looks in Redis for a reservation the ledger has no row of.
async fn locate_in_redis(
    redis: &RedisStore,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Result<OnlyInRedis, LifecycleError> {
    Ok(
        match redis.reservations().reservation(sku_id, request_id).await? {
            // A CONFIRMED record whose row MySQL lost is applied like a
            // reserved one, then confirmed (see the lifecycle's module doc).
            Some(r)
                if matches!(
                    r.status,
                    ReservationStatus::Reserved | ReservationStatus::Confirmed
                ) =>
            {
                OnlyInRedis::Live(Deduction::from(&r))
            }
            Some(r) if r.status == ReservationStatus::Released => OnlyInRedis::Released(r),
            _ => OnlyInRedis::Nowhere,
        },
    )
}
