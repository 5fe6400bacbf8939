//! Decisions MySQL lost that the Redis mirror proves (docs/operations.md,
//! "MySQL failover"). A mirror is written only after MySQL committed, so a
//! record that says CONFIRMED or RELEASED while MySQL holds the row as RESERVED,
//! or holds no row at all, is a decision MySQL made and then lost with a
//! failover to a lagging replica. Any transition asked of such a reservation
//! re-applies that decision first, and answers as if it had won the race:
//! a paid unit is never released, a released one never confirmed. The same
//! holds for an extension: a RESERVED record with a later time than MySQL's
//! row of the same admission is an extension MySQL lost, and an expiry
//! re-applies it instead of releasing a unit the buyer was told is held.

use super::{Transition, TransitionOutcome};
use crate::db::ledger::{self, reason, settle, LedgerRow};
use crate::db::{event_outbox, sku, Db, DbError};
use crate::domain::{is_due, Deduction, RequestId, Reservation, ReservationStatus, SkuId};
use crate::redis::RedisStore;

use super::LifecycleError;

/// The transition to apply for `asked`: the decision the Redis mirror proves
/// when MySQL lacks it, else `asked`. One MySQL and one Redis read, outside
/// any transaction. A confirm or cancel does not wait for Redis (without the
/// mirror nothing is proven, and neither ever did); an expiry does (the closer
/// retries it), since releasing unchecked could free a paid unit.
pub(super) async fn transition(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    request_id: &RequestId,
    asked: Transition,
    now_ms: u64,
) -> Result<Transition, LifecycleError> {
    let row = db
        .bounded(async {
            let mut conn = db.conn().await?;
            ledger::find(&mut conn, sku_id, request_id).await
        })
        .await?;
    let asked_of = Asked { sku_id, request_id };
    transition_given(db, redis, &asked_of, row.as_ref(), asked, now_ms).await
}

/// The reservation [`transition_given`] is about.
pub(super) struct Asked<'a> {
    pub sku_id: SkuId,
    pub request_id: &'a RequestId,
}

/// [`transition`] with MySQL's row read already (a batch reads its rows in
/// one query: `expire_many`): the same rule, one home.
pub(super) async fn transition_given(
    db: &Db,
    redis: &RedisStore,
    of: &Asked<'_>,
    row: Option<&LedgerRow>,
    asked: Transition,
    now_ms: u64,
) -> Result<Transition, LifecycleError> {
    let (sku_id, request_id) = (of.sku_id, of.request_id);
    if row
        .as_ref()
        .is_some_and(|r| r.status != ReservationStatus::Reserved)
    {
        return Ok(asked); // MySQL decided already: its state stands
    }
    let record = match redis.reservations().reservation(sku_id, request_id).await {
        Ok(record) => record,
        Err(err) if asked != Transition::Expire => {
            tracing::debug!(error = %err, "lifecycle: Redis not read before a confirm or cancel");
            return Ok(asked);
        }
        Err(err) => return Err(err.into()),
    };
    if let (Transition::Expire, Some(row), Some(record)) = (asked, row, &record) {
        if later_in_redis(row, record) {
            let reservations = redis.reservations();
            let mirrored = reservations
                .mirrored_extensions(sku_id, request_id, record.user_id)
                .await?;
            if mirrored > 0 {
                reapply_extension(db, record, mirrored).await?;
            }
            // The decision reads the row again: the later time, if re-applied.
        }
    }
    let proven = match record.as_ref().map(|r| r.status) {
        Some(ReservationStatus::Confirmed) => Transition::Confirm,
        Some(ReservationStatus::Released) => {
            release_of(record.as_ref().map(|r| r.expires_at_ms), asked, now_ms)
        }
        _ => return Ok(asked),
    };
    if proven != asked {
        metrics::counter!("stockd_lost_decisions_reapplied_total").increment(1);
        tracing::warn!(sku.id = %sku_id, request.id = %request_id, asked = ?asked, reapplied = ?proven,
            "lifecycle: Redis mirrors a decision MySQL does not have (lost by a failover); re-applying it");
    }
    Ok(proven)
}

/// Whether the Redis record may mirror an extension MySQL lost: both still
/// reserved, the same admission (a readmitted record has another creation
/// time, and its later time is no extension), and the record's time later.
/// The proof is the record's count of extensions (`ext`), read only then.
fn later_in_redis(row: &LedgerRow, record: &Reservation) -> bool {
    row.status == ReservationStatus::Reserved
        && record.status == ReservationStatus::Reserved
        && record.created_at_ms == row.reserved_at_ms
        && record.expires_at_ms > row.expires_at_ms
}

/// Moves the row's time and count of extensions to the record's, when the
/// row has fewer extensions (MySQL lost the commit of the difference) and an
/// earlier time. The guards make it a no-op for anything else.
async fn reapply_extension(db: &Db, record: &Reservation, mirrored: u32) -> Result<(), DbError> {
    let reapplied = db
        .bounded(async {
            let mut conn = db.conn().await?;
            let (sku_id, request_id) = (record.sku_id, &record.request_id);
            let (expires_at_ms, extensions) = (record.expires_at_ms, mirrored);
            settle::restore_extension(&mut conn, sku_id, request_id, expires_at_ms, extensions)
                .await
        })
        .await?;
    if reapplied {
        metrics::counter!("stockd_lost_decisions_reapplied_total").increment(1);
        tracing::warn!(sku.id = %record.sku_id, request.id = %record.request_id,
            "lifecycle: Redis mirrors an extension MySQL does not have (lost by a failover); re-applied it");
    }
    Ok(())
}

/// The release a RELEASED record stands for: the one asked if it is a
/// release, else an expiry once the reservation's time has passed (a cancel
/// before). The record does not say which it was.
/// `expires_ms` is the record's time (`None`: no record to say).
/// Shared by whole orders (`order_recovered`).
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
pub(super) fn outcome_of_release(row: LedgerRow, asked: Transition) -> TransitionOutcome {
    if row.status == asked.target() {
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
}
