//! Decisions MySQL lost that the Redis mirror proves (docs/operations.md,
//! "MySQL failover"), for a hold of any size. A mirror is written only after
//! MySQL committed (a reservation's record by `finish.lua`, an order's record
//! marked by `order_mark.lua` after its lines), so a record that says
//! CONFIRMED or RELEASED while MySQL holds the deciding row as RESERVED, or
//! holds no row at all, is a decision MySQL made and then lost with a
//! failover to a lagging replica. Any transition asked of such a hold
//! re-applies that decision first, and answers as if it had won the race: a
//! paid unit is never released, a released one never confirmed. The same
//! holds for an extension: a RESERVED record of the same admission with a
//! later time than MySQL's row is an extension MySQL lost, and an expiry
//! re-applies it ([`Hold::reapply_extension`]) instead of releasing a hold
//! the buyer was told is held. A record whose mirror failed proves nothing,
//! and MySQL's state stands.

use super::hold::{Hold, HoldRow, TransitionOutcome};
use super::{LifecycleError, Transition};
use crate::db::ledger::{self, reason, LedgerRow};
use crate::db::{event_outbox, sku, Db, DbError};
use crate::domain::{is_due, Deduction, Reservation, ReservationStatus};
use crate::redis::RedisStore;

/// The transition to apply for `asked`: the decision the Redis record
/// proves when MySQL lacks it, else `asked`. `row` is MySQL's deciding row,
/// read unlocked by the caller (a batch reads its rows in one query:
/// `expire_many`). A confirm or cancel does not wait for Redis (without the
/// record nothing is proven, and neither ever did); an expiry does (the
/// closer retries it), since releasing unchecked could free a paid unit.
pub(super) async fn proven<H: Hold>(
    db: &Db,
    redis: &RedisStore,
    hold: &H,
    row: Option<&H::Row>,
    asked: Transition,
    now_ms: u64,
) -> Result<Transition, LifecycleError> {
    if row.is_some_and(|r| r.status() != ReservationStatus::Reserved) {
        return Ok(asked); // MySQL decided already: its state stands
    }
    let record = match hold.record(redis).await {
        Ok(record) => record,
        Err(err) if asked != Transition::Expire => {
            tracing::debug!(error = %err, "lifecycle: Redis not read before a confirm or cancel");
            return Ok(asked);
        }
        Err(err) => return Err(err.into()),
    };
    if let (Transition::Expire, Some(row), Some(record)) = (asked, row, &record) {
        hold.reapply_extension(db, redis, row, record).await?;
        // The decision reads the row again: the later time, if re-applied.
    }
    let proven = match record.as_ref().map(H::proves) {
        Some((ReservationStatus::Confirmed, _)) => Transition::Confirm,
        Some((ReservationStatus::Released, expires_ms)) => {
            release_of(Some(expires_ms), asked, now_ms)
        }
        _ => return Ok(asked),
    };
    if proven != asked {
        metrics::counter!("stockd_lost_decisions_reapplied_total").increment(1);
        tracing::warn!(hold = %hold, asked = ?asked, reapplied = ?proven,
            "lifecycle: Redis mirrors a decision MySQL does not have (lost by a failover); re-applying it");
    }
    Ok(proven)
}

/// The release a RELEASED record stands for: the one asked if it is a
/// release, else an expiry once the reservation's time has passed (a cancel
/// before). The record does not say which it was.
/// `expires_ms` is the record's time (`None`: no record to say).
pub(super) fn release_of(expires_ms: Option<u64>, asked: Transition, now_ms: u64) -> Transition {
    match asked {
        Transition::Cancel | Transition::Expire => asked,
        Transition::Confirm => match expires_ms {
            Some(expires_ms) if is_due(expires_ms, now_ms) => Transition::Expire,
            _ => Transition::Cancel,
        },
    }
}

/// Writes the ledger row of a reservation MySQL lost together with its
/// release: RELEASED from the start, so it never holds stock (Redis already
/// gave the units back). Under the SKU row lock; a row another writer put
/// there meanwhile is returned as it is.
pub(super) async fn record_release(
    db: &Db,
    record: &Reservation,
    asked: Transition,
    now_ms: u64,
) -> Result<LedgerRow, DbError> {
    let why = match release_of(Some(record.expires_at_ms), asked, now_ms) {
        Transition::Expire => reason::EXPIRED,
        _ => reason::CANCELLED,
    };
    let msg = Deduction::from(record);
    let mut conn = db.conn().await?;
    let mut tx = conn.start_transaction(ledger::tx_opts()).await?;
    let mut out = db.outgoing();
    sku::lock_noted(&mut tx, record.sku_id, &mut out).await?;
    if let Some(row) = ledger::find_for_update(&mut tx, record.sku_id, &record.request_id).await? {
        tx.commit().await?;
        return Ok(row);
    }
    let mut rows = [ledger::NewRow::new(
        &msg,
        ReservationStatus::Released,
        Some(why),
    )];
    ledger::note_inserted(&mut out, &mut rows, now_ms);
    ledger::insert_rows(&mut tx, &rows).await?;
    event_outbox::stage(&mut tx, out, now_ms).await?;
    tx.commit().await?;
    tracing::warn!(sku.id = %record.sku_id, request.id = %record.request_id,
        "lifecycle: a reservation MySQL lost with its release is recorded RELEASED from its Redis record");
    Ok(LedgerRow {
        status: ReservationStatus::Released,
        redis_pending: false,
        ..LedgerRow::rejected(&msg, why)
    })
}

/// What `asked` answers for a row recorded by [`record_release`]: a repeat
/// for a release, a conflict for a confirm (the payment came too late).
pub(super) fn outcome_of_release<R: HoldRow>(row: R, asked: Transition) -> TransitionOutcome<R> {
    if row.status() == asked.target() {
        TransitionOutcome::Done {
            row,
            changed: false,
        }
    } else {
        TransitionOutcome::Conflict { row }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{RequestId, SkuId};

    #[test]
    fn a_released_record_stands_for_the_release_asked_or_by_its_time() {
        let record = Reservation {
            request_id: RequestId::parse("r").unwrap(),
            sku_id: SkuId::new(1).unwrap(),
            user_id: crate::domain::UserId::new(1).unwrap(),
            count: 1,
            status: ReservationStatus::Released,
            created_at_ms: 10,
            expires_at_ms: 100,
            client: None,
        };
        let r = Some(record.expires_at_ms);
        assert_eq!(release_of(r, Transition::Cancel, 50), Transition::Cancel);
        assert_eq!(release_of(r, Transition::Expire, 50), Transition::Expire);
        assert_eq!(release_of(r, Transition::Confirm, 50), Transition::Cancel);
        assert_eq!(release_of(r, Transition::Confirm, 100), Transition::Expire);
    }

    #[test]
    fn a_released_record_is_the_release_asked_or_the_one_its_time_says() {
        assert_eq!(
            release_of(Some(10), Transition::Cancel, 5),
            Transition::Cancel
        );
        assert_eq!(
            release_of(Some(10), Transition::Expire, 50),
            Transition::Expire
        );
        assert_eq!(
            release_of(Some(10), Transition::Confirm, 50),
            Transition::Expire
        );
        assert_eq!(
            release_of(Some(10), Transition::Confirm, 5),
            Transition::Cancel
        );
    }
}
