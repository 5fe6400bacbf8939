//! The one transition of a hold (confirm, cancel, expire), whichever its
//! size: the proof of a lost decision first (`recovered`), then the decision
//! in one transaction under the ledger lock protocol ([`Hold::lock`]), then
//! the Redis mirror. The reconciler's re-apply of a decision MySQL lost goes
//! through it too ([`reapply_lost`]).

use super::hold::{Hold, HoldRow, Located, Locked, TransitionOutcome};
use super::{recovered, retried, within_query_bound, LifecycleError, Transition};
use crate::db::{event_outbox, Db, DbError};
use crate::domain::{is_due, Requester, ReservationStatus};
use crate::redis::RedisStore;

/// Applies `transition` to `hold`, MySQL first, then the Redis mirror.
///
/// Bounded as docs/architecture.md "Every wait is bounded" says: the decision
/// (its reads, the proof and every deadlock retry) within one
/// `mysql.query_timeout_ms`, then the Redis mirror.
///
/// Asked by `requester`: another client's hold is
/// [`TransitionOutcome::NotFound`], nothing written (contract §6.2);
/// [`Requester::Anyone`] for stockd's own roles and with `auth.required` false.
pub async fn transition<H: Hold>(
    db: &Db,
    redis: &RedisStore,
    hold: &H,
    transition: Transition,
    now_ms: u64,
    requester: &Requester,
) -> Result<TransitionOutcome<H::Row>, LifecycleError> {
    // Boxed: the decision's future is large, and the reconciler's repair
    // awaits it deep in its own (a debug build's stack would not hold both).
    Box::pin(async move {
        let decision = async {
            let row = hold.row(db).await?;
            let proven =
                recovered::proven(db, redis, hold, row.as_ref(), transition, now_ms).await?;
            let outcome = retried(|| decide(db, redis, hold, requester, proven, now_ms)).await?;
            Ok::<_, LifecycleError>((outcome, proven))
        };
        let (outcome, applied) = within_query_bound(db, decision).await?;
        match &outcome {
            TransitionOutcome::Done { row, changed: true } => {
                hold.mirror_decided(db, redis, row).await;
            }
            // Possibly inserted as REJECTED just now: return the quota in Redis.
            TransitionOutcome::Conflict { row }
                if H::MIRRORS_REJECTION && row.status() == ReservationStatus::Rejected =>
            {
                hold.mirror_decided(db, redis, row).await;
            }
            _ => {}
        }
        Ok(match outcome {
            // A cancel or expiry that found the payment decided: the payment won.
            TransitionOutcome::Done { row, .. } if applied != transition => {
                TransitionOutcome::Conflict { row }
            }
            other => other,
        })
    })
    .await
}

/// One attempt at the decision: one transaction under the ledger lock protocol.
async fn decide<H: Hold>(
    db: &Db,
    redis: &RedisStore,
    hold: &H,
    requester: &Requester,
    transition: Transition,
    now_ms: u64,
) -> Result<TransitionOutcome<H::Row>, LifecycleError> {
    let mut conn = db.conn().await?;
    let locked = hold.lock(&mut conn, db, redis, requester, transition, now_ms);
    let Locked {
        mut tx,
        row,
        mut out,
    } = match locked.await? {
        Located::Locked(locked) => locked,
        Located::ReleaseRecorded(row) => return Ok(recovered::outcome_of_release(row, transition)),
        Located::NotFound => return Ok(TransitionOutcome::NotFound),
        Located::OrderLine => return Ok(TransitionOutcome::OrderLine),
    };
    let outcome = match settled_already(&row, transition, now_ms) {
        Some(outcome) => outcome,
        None => {
            let row = hold.finish_locked(&mut tx, &row, transition, now_ms, &mut out);
            TransitionOutcome::Done {
                row: row.await?,
                changed: true,
            }
        }
    };
    // Committed whatever the outcome: a deduction applied by the lock step stays.
    event_outbox::stage(&mut tx, out, now_ms).await?;
    tx.commit().await.map_err(DbError::from)?;
    Ok(outcome)
}

/// The answer when the locked `row` leaves `transition` nothing to change: a
/// repeat, another final state, or an expiry before its time. `None`: go on.
pub(super) fn settled_already<R: HoldRow>(
    row: &R,
    transition: Transition,
    now_ms: u64,
) -> Option<TransitionOutcome<R>> {
    if row.status() == transition.target() {
        Some(TransitionOutcome::Done {
            row: row.clone(),
            changed: false,
        })
    } else if row.status() != ReservationStatus::Reserved {
        Some(TransitionOutcome::Conflict { row: row.clone() })
    } else if transition == Transition::Expire && !is_due(row.expires_at_ms(), now_ms) {
        Some(TransitionOutcome::NotYetExpired)
    } else {
        None
    }
}

/// The reconciler's repair of a decision MySQL lost (`proven`: the status
/// Redis holds): the hold applied from its record when MySQL lacks it, as the
/// consumer would (the lock step does), then the decision the record proves.
/// A hold Redis still holds undecided is only applied. False when Redis no
/// longer has the record or the hold is nowhere (nothing can be proven); a
/// repeat when already done. An order is re-applied
/// whole, as an order, never its lines as single reservations.
pub async fn reapply_lost<H: Hold>(
    db: &Db,
    redis: &RedisStore,
    hold: &H,
    proven: ReservationStatus,
    now_ms: u64,
) -> Result<bool, LifecycleError> {
    let Some(record) = hold.record(redis).await? else {
        return Ok(false);
    };
    let wanted = match proven {
        ReservationStatus::Confirmed => Transition::Confirm,
        ReservationStatus::Released => {
            recovered::release_of(Some(H::proves(&record).1), Transition::Confirm, now_ms)
        }
        // Boxed, as `transition` is: the reconciler awaits it deep in its own.
        _ => return within_query_bound(db, Box::pin(applied(db, redis, hold, now_ms))).await,
    };
    let outcome = transition(db, redis, hold, wanted, now_ms, &Requester::Anyone).await?;
    Ok(!matches!(outcome, TransitionOutcome::NotFound))
}

/// Whether MySQL has the hold, after the lock step applied it from its
/// Redis record when only Redis has it (the lock is let go at once).
async fn applied<H: Hold>(
    db: &Db,
    redis: &RedisStore,
    hold: &H,
    now_ms: u64,
) -> Result<bool, LifecycleError> {
    let mut conn = db.conn().await?;
    let anyone = &Requester::Anyone;
    let located = hold.lock(&mut conn, db, redis, anyone, Transition::Confirm, now_ms);
    let found = !matches!(located.await?, Located::NotFound);
    Ok(found)
}
