//! A hold while the buyer pays: `POST .../extend` moves a `RESERVED`
//! reservation's `expires_at` by `reservation.extend_secs`, at most
//! `reservation.max_extensions` times (contract §5, "Extending the time to
//! pay").
//!
//! MySQL decides, as for every transition: the row is locked under the ledger
//! lock protocol and moved by a conditional update, so an extension racing
//! the closer's expiry has one winner. The expiry first locks the same row:
//! if it wins, the extension finds `RELEASED`; if the extension wins, the
//! expiry finds the later time and leaves the reservation (`NotYetExpired`).
//! An extension that comes after `expires_at` but before the closer acted
//! still wins, as a late payment does: the row is what decides, not the clock.
//!
//! Redis mirrors the new time into the reservation record afterwards
//! (`extend.lua`), for replays and reads, and as the proof a lost commit is
//! judged by (`recovered::later_in_redis` and the record's `ext`). A failed
//! mirror changes no decision: the closer and the sweep read MySQL's time.

use super::locate::{self, Located, Locked};
use super::{retried, within_query_bound, Asked, LifecycleError, Transition};
use crate::db::ledger::{settle, LedgerRow};
use crate::db::{event_outbox, Db, DbError};
use crate::domain::ReservationStatus;
use crate::redis::RedisStore;

/// How far one extension moves the time, and how many a reservation may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension {
    /// `reservation.extend_secs` in ms.
    pub by_ms: u64,
    /// `reservation.max_extensions`.
    pub max: u32,
}

impl Extension {
    pub fn from_settings(settings: &crate::config::ReservationSettings) -> Self {
        Self {
            by_ms: settings.extend_secs * 1000,
            max: settings.max_extensions,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtendOutcome {
    /// Moved: `row.expires_at_ms` is the new time, `extensions` the count
    /// of extensions the row has had now.
    Extended { row: LedgerRow, extensions: u32 },
    /// The reservation is final (`row.status` says how): nothing to extend.
    Final { row: LedgerRow },
    /// It had `max_extensions` extensions already; `row` as it stands.
    LimitReached { row: LedgerRow },
    /// No such reservation in MySQL or Redis.
    NotFound,
    /// A line of an order: only the whole order is extended.
    OrderLine,
}

/// Extends one reservation: the MySQL decision (within one
/// `mysql.query_timeout_ms`, deadlocks retried), then the Redis mirror.
/// Another client's reservation is [`ExtendOutcome::NotFound`], nothing
/// written (contract §6.2).
pub async fn extend(
    db: &Db,
    redis: &RedisStore,
    extension: Extension,
    asked: &Asked<'_>,
    now_ms: u64,
) -> Result<ExtendOutcome, LifecycleError> {
    let (sku_id, request_id) = (asked.sku_id, asked.request_id);
    let decision = retried(|| decide(db, redis, extension, asked, now_ms));
    let outcome = within_query_bound(db, decision).await?;
    if let ExtendOutcome::Extended { row, extensions } = &outcome {
        let mirrored = redis
            .reservations()
            .extend(
                sku_id,
                request_id,
                row.user_id,
                row.expires_at_ms,
                *extensions,
            )
            .await;
        if let Err(err) = mirrored {
            // MySQL decided; the record shows the old time until a later
            // extension or the record's end. The closer and the sweep decide
            // by MySQL's time; without the mirror, a failover that loses this
            // commit has no proof to re-apply it from (`recovered`).
            crate::health::outage::failed("redis", &err);
        }
        metrics::counter!("stockd_reservation_extensions_total").increment(1);
    }
    Ok(outcome)
}

/// One attempt: one transaction under the ledger lock protocol.
async fn decide(
    db: &Db,
    redis: &RedisStore,
    extension: Extension,
    asked: &Asked<'_>,
    now_ms: u64,
) -> Result<ExtendOutcome, LifecycleError> {
    let mut conn = db.conn().await?;
    // A release recorded from Redis came, like a late payment, too late:
    // `Confirm` makes it an expiry or a cancel by the record's time.
    let locked = locate::lock(&mut conn, db, redis, asked, Transition::Confirm, now_ms);
    let Locked { mut tx, row, out } = match locked.await? {
        Located::Locked(locked) => locked,
        Located::ReleaseRecorded(row) => return Ok(ExtendOutcome::Final { row }),
        Located::NotFound => return Ok(ExtendOutcome::NotFound),
        Located::OrderLine => return Ok(ExtendOutcome::OrderLine),
    };
    let outcome = if row.status != ReservationStatus::Reserved {
        ExtendOutcome::Final { row }
    } else {
        match settle::extend_locked(&mut tx, &row, extension.by_ms, extension.max).await? {
            Some(extensions) => ExtendOutcome::Extended {
                row: LedgerRow {
                    expires_at_ms: row.expires_at_ms + extension.by_ms,
                    ..row
                },
                extensions,
            },
            None => ExtendOutcome::LimitReached { row },
        }
    };
    // Committed whatever the outcome: a deduction applied by the lock step stays.
    event_outbox::stage(&mut tx, out, now_ms).await?;
    tx.commit().await.map_err(DbError::from)?;
    Ok(outcome)
}
