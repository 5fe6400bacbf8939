//! A hold while the buyer pays: `POST .../extend` moves a `RESERVED` hold's
//! `expires_at` (an order's and every line's) by `reservation.extend_secs`,
//! at most `reservation.max_extensions` times (contract §5, "Extending the
//! time to pay").
//!
//! MySQL decides, as for every transition: the hold is locked under the
//! ledger lock protocol and moved by a conditional update of its deciding
//! row, its lines following in the same transaction, so an extension racing
//! the closer's expiry has one winner. The expiry first locks the same rows:
//! if it wins, the extension finds `RELEASED`; if the extension wins, the
//! expiry finds the later time and leaves the hold (`NotYetExpired`). An
//! extension that comes after `expires_at` but before the closer acted still
//! wins, as a late payment does: the row is what decides, not the clock.
//!
//! Redis mirrors the new time afterwards (`Hold::mirror_extension`), for
//! replays and reads, and as the proof a lost commit is judged by
//! (`Hold::reapply_extension`). A failed mirror changes no decision: the
//! closer and the sweep read MySQL's time.

use super::hold::{Hold, HoldRow, Located, Locked};
use super::{retried, within_query_bound, LifecycleError, Transition};
use crate::db::{event_outbox, Db, DbError};
use crate::domain::{Requester, ReservationStatus};
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
pub enum ExtendOutcome<R = crate::db::ledger::LedgerRow> {
    /// Moved: `row` with its new time, `extensions` the count of extensions
    /// the hold has had now.
    Extended { row: R, extensions: u32 },
    /// The hold is final (`row`'s status says how): nothing to extend.
    Final { row: R },
    /// It had `max_extensions` extensions already; `row` as it stands.
    LimitReached { row: R },
    /// No such hold in MySQL or Redis.
    NotFound,
    /// A line of an order named alone: only the whole order is extended.
    OrderLine,
}

/// A whole order's extension outcome.
pub type OrderExtendOutcome = ExtendOutcome<crate::db::orders::OrderRow>;

/// Extends `hold`: the MySQL decision (within one `mysql.query_timeout_ms`,
/// deadlocks retried), then the Redis mirror. Another client's hold is
/// [`ExtendOutcome::NotFound`], nothing written (contract §6.2).
pub async fn extend<H: Hold>(
    db: &Db,
    redis: &RedisStore,
    hold: &H,
    extension: Extension,
    now_ms: u64,
    requester: &Requester,
) -> Result<ExtendOutcome<H::Row>, LifecycleError> {
    let decision = retried(|| decide(db, redis, hold, extension, now_ms, requester));
    let outcome = within_query_bound(db, decision).await?;
    if let ExtendOutcome::Extended { row, extensions } = &outcome {
        hold.mirror_extension(redis, row, *extensions).await;
    }
    Ok(outcome)
}

/// One attempt: one transaction under the ledger lock protocol.
async fn decide<H: Hold>(
    db: &Db,
    redis: &RedisStore,
    hold: &H,
    extension: Extension,
    now_ms: u64,
    requester: &Requester,
) -> Result<ExtendOutcome<H::Row>, LifecycleError> {
    let mut conn = db.conn().await?;
    // A release recorded from Redis came, like a late payment, too late:
    // `Confirm` makes it an expiry or a cancel by the record's time.
    let locked = hold.lock(&mut conn, db, redis, requester, Transition::Confirm, now_ms);
    let Locked { mut tx, row, out } = match locked.await? {
        Located::Locked(locked) => locked,
        Located::ReleaseRecorded(row) => return Ok(ExtendOutcome::Final { row }),
        Located::NotFound => return Ok(ExtendOutcome::NotFound),
        Located::OrderLine => return Ok(ExtendOutcome::OrderLine),
    };
    let outcome = if row.status() != ReservationStatus::Reserved {
        ExtendOutcome::Final { row }
    } else {
        let (by_ms, max) = (extension.by_ms, extension.max);
        match hold.extend_locked(&mut tx, &row, by_ms, max).await? {
            Some((row, extensions)) => ExtendOutcome::Extended { row, extensions },
            None => ExtendOutcome::LimitReached { row },
        }
    };
    // Committed whatever the outcome: a deduction applied by the lock step stays.
    event_outbox::stage(&mut tx, out, now_ms).await?;
    tx.commit().await.map_err(DbError::from)?;
    Ok(outcome)
}
