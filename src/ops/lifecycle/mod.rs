//! The reservation lifecycle (contract §5): confirm, cancel, expire.
//!
//! MySQL decides. Each transition is one transaction that follows the ledger
//! lock protocol (SKU row first, then the ledger row) and one conditional update
//! `... WHERE status = 'RESERVED'`, so when payment and expiry race exactly one
//! wins and the other sees the final state. A release gives the units back to
//! `available_stock` in the same transaction.
//!
//! Order of arrival never matters: a transition that finds no ledger row yet
//! (the consumer is behind) first applies the deduction from the reservation
//! record in Redis, then transitions; the late deduction message is then a
//! duplicate the consumer skips.
//!
//! Redis mirrors the decision afterwards (`finish.lua`, idempotent). The row
//! carries `redis_pending = 1` until the mirror succeeded, and the closer's sweep
//! retries pending mirrors, so a Redis outage delays the mirror but never loses it.
//!
//! The mirror is written only after MySQL committed, so a Redis record that says
//! CONFIRMED proves the payment was decided — even when MySQL lost that commit
//! (a failover to a lagging replica). A cancel or an expiry of such a
//! reservation therefore re-applies the confirm instead and answers as if the
//! payment had won the race: a paid unit is never released; a released one
//! is never confirmed (`recovered`, docs/operations.md "MySQL failover").
//!
//! Holds belong to their client (contract §6.2): a confirm, cancel or
//! extension asked by a client of another client's reservation finds it
//! nowhere (`NotFound`) before anything is written — checked on the row
//! under its lock, or, when the consumer has not applied it yet, on the Redis
//! record the lock step reads anyway (`locate`).

use crate::clock::unix_ms;
use crate::db::ledger::{self, reason, settle, LedgerRow};
use crate::db::{event_outbox, Db, DbError};
use crate::domain::{is_due, RequestId, Requester, ReservationStatus, SkuId};
use crate::redis::{FinishEffect, FinishOutcome, RedisError, RedisStore};
use locate::{Located, Locked};

mod expire_many;
mod extend;
mod locate;
mod order;
mod order_extend;
mod order_recovered;
mod recovered;

pub use expire_many::{expire_many, mirror_many};
pub use extend::{extend, ExtendOutcome, Extension};
pub use order::{transition_order, OrderTransitionOutcome};
pub use order_extend::{extend_order, OrderExtendOutcome};
pub use order_recovered::reapply_lost as reapply_lost_order;

/// Deadlock / lock-timeout retries of one transition.
const TRANSITION_RETRIES: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The order service reports payment.
    Confirm,
    /// The buyer or order service cancels.
    Cancel,
    /// The time to pay ran out (closer).
    Expire,
}

impl Transition {
    fn target(self) -> ReservationStatus {
        match self {
            Self::Confirm => ReservationStatus::Confirmed,
            Self::Cancel | Self::Expire => ReservationStatus::Released,
        }
    }

    fn reason(self) -> Option<&'static str> {
        match self {
            Self::Confirm => None,
            Self::Cancel => Some(reason::CANCELLED),
            Self::Expire => Some(reason::EXPIRED),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitionOutcome {
    /// The reservation is in the target state (now, or already before: a repeat).
    Done { row: LedgerRow, changed: bool },
    /// The reservation ended another way; `row.status` says how.
    Conflict { row: LedgerRow },
    /// An expiry that came before the reservation's time (it stays).
    NotYetExpired,
    /// No such reservation in MySQL or Redis.
    NotFound,
    /// A line of an order: only the whole order moves (`transition_order`).
    OrderLine,
}

#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
}

/// Applies `transition` to one reservation, MySQL first, then the Redis mirror.
///
/// Bounded as docs/architecture.md "Every wait is bounded" says: the decision
/// (its reads and every deadlock retry) within one `mysql.query_timeout_ms`,
/// then the Redis mirror within one Redis bound; clearing the row's pending flag
/// runs after the answer (`mirror_then_clear_later`).
///
/// Asked by `requester`: another client's reservation is
/// [`TransitionOutcome::NotFound`], nothing written (contract §6.2);
/// [`Requester::Anyone`] for stockd's own roles and with `auth.required` false.
pub async fn transition(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    request_id: &RequestId,
    transition: Transition,
    now_ms: u64,
    requester: &Requester,
) -> Result<TransitionOutcome, LifecycleError> {
    // Boxed: the decision's future is large, and the reconciler's repair
    // awaits it deep in its own (a debug build's stack would not hold both).
    Box::pin(async move {
        let asked = Asked {
            sku_id,
            request_id,
            requester,
        };
        let decision = decide_with_retries(db, redis, &asked, transition, now_ms);
        let (outcome, applied) = within_query_bound(db, decision).await?;
        match &outcome {
            TransitionOutcome::Done { row, changed: true } => {
                mirror_then_clear_later(db, redis, row).await;
            }
            // Possibly inserted as REJECTED just now: return the user's quota in Redis.
            TransitionOutcome::Conflict { row } if row.status == ReservationStatus::Rejected => {
                mirror_then_clear_later(db, redis, row).await;
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

/// The decision and the transition it applied (a lost confirm re-applied
/// instead of a cancel or expiry), retrying deadlocks and lock timeouts.
async fn decide_with_retries(
    db: &Db,
    redis: &RedisStore,
    asked: &Asked<'_>,
    wanted: Transition,
    now_ms: u64,
) -> Result<(TransitionOutcome, Transition), LifecycleError> {
    let (sku_id, request_id) = (asked.sku_id, asked.request_id);
    let transition = recovered::transition(db, redis, sku_id, request_id, wanted, now_ms).await?;
    let outcome = retried(|| decide(db, redis, asked, transition, now_ms)).await?;
    Ok((outcome, transition))
}

/// The reservation a decision is about, and who asks.
pub struct Asked<'a> {
    pub sku_id: SkuId,
    pub request_id: &'a RequestId,
    pub requester: &'a Requester,
}

/// `decision` within one `mysql.query_timeout_ms` (its reads and every
/// retry): past it, `QueryTimeout` (docs/architecture.md, "Every wait is
/// bounded").
async fn within_query_bound<T>(
    db: &Db,
    decision: impl std::future::Future<Output = Result<T, LifecycleError>>,
) -> Result<T, LifecycleError> {
    match tokio::time::timeout(db.operation_bound(), decision).await {
        Ok(result) => result,
        Err(_) => Err(LifecycleError::Db(DbError::QueryTimeout)),
    }
}

/// Runs `attempt` again on a deadlock or lock-wait timeout, at most
/// [`TRANSITION_RETRIES`] more times.
async fn retried<T, F, Fut>(mut attempt: F) -> Result<T, LifecycleError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LifecycleError>>,
{
    let mut retries = 0;
    loop {
        match attempt().await {
            Err(LifecycleError::Db(err)) if err.is_retryable() && retries < TRANSITION_RETRIES => {
                retries += 1;
            }
            other => return other,
        }
    }
}

/// One attempt at the decision: one transaction under the ledger lock protocol.
async fn decide(
    db: &Db,
    redis: &RedisStore,
    asked: &Asked<'_>,
    transition: Transition,
    now_ms: u64,
) -> Result<TransitionOutcome, LifecycleError> {
    let mut conn = db.conn().await?;
    let locked = locate::lock(&mut conn, db, redis, asked, transition, now_ms);
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
    if let Some(outcome) = settled_already(&row, transition, now_ms) {
        // Commit, not roll back: a deduction applied above must stay.
        event_outbox::stage(&mut tx, out, now_ms).await?;
        tx.commit().await.map_err(DbError::from)?;
        return Ok(outcome);
    }
    let target = transition.target();
    let why = transition.reason();
    settle::finish_locked(&mut tx, &row, target, why, now_ms, &mut out).await?;
    event_outbox::stage(&mut tx, out, now_ms).await?;
    tx.commit().await.map_err(DbError::from)?;
    let row = LedgerRow {
        status: target,
        reason: transition.reason().map(str::to_string),
        redis_pending: true,
        ..row
    };
    Ok(TransitionOutcome::Done { row, changed: true })
}

/// The answer when the locked `row` leaves `transition` nothing to change: a
/// repeat, another final state, or an expiry before its time. `None`: go on.
fn settled_already(
    row: &LedgerRow,
    transition: Transition,
    now_ms: u64,
) -> Option<TransitionOutcome> {
    if row.status == transition.target() {
        Some(TransitionOutcome::Done {
            row: row.clone(),
            changed: false,
        })
    } else if row.status != ReservationStatus::Reserved {
        Some(TransitionOutcome::Conflict { row: row.clone() })
    } else if transition == Transition::Expire && !is_due(row.expires_at_ms, now_ms) {
        Some(TransitionOutcome::NotYetExpired)
    } else {
        None
    }
}

/// Mirrors a decided row to Redis and clears its pending flag. A failure is
/// logged and left for the closer's sweep, which calls this again.
pub async fn mirror(db: &Db, redis: &RedisStore, row: &LedgerRow) -> bool {
    if !mirror_to_redis(redis, row).await {
        return false;
    }
    clear_pending(db, row).await;
    true
}

/// [`mirror`] for an answer someone waits on: the Redis step now, the MySQL
/// step (clearing the pending flag) in the background, so the answer waits for
/// one MySQL bound, not two. A clear that fails leaves the flag for the sweep,
/// whose repeat of the mirror is idempotent.
async fn mirror_then_clear_later(db: &Db, redis: &RedisStore, row: &LedgerRow) {
    if mirror_to_redis(redis, row).await {
        let (db, row) = (db.clone(), row.clone());
        tokio::spawn(async move { clear_pending(&db, &row).await });
    }
}

/// The Redis half of [`mirror`]; false when Redis failed (left to the sweep).
async fn mirror_to_redis(redis: &RedisStore, row: &LedgerRow) -> bool {
    let effect = finish_effect(row);
    let returns_stock = effect == FinishEffect::ReturnsStock;
    let lapsed = effect == FinishEffect::Lapsed;
    let mirrored = redis
        .reservations()
        .finish(
            row.sku_id,
            &row.request_id,
            row.user_id,
            row.count,
            row.status,
            effect,
        )
        .await;
    let outcome = match mirrored {
        Ok(outcome) => outcome,
        Err(err) => {
            // Redis is down: the outage log reports it once; the sweep retries.
            crate::health::outage::failed("redis", &err);
            return false;
        }
    };
    if lapsed && outcome != FinishOutcome::Already {
        // Once per hold (a reservation or an order line): the mirror that
        // counted the lapse in Redis (`Already` is a repeat).
        metrics::counter!("stockd_holds_lapsed_total").increment(1);
    }
    let restocked = row.status == ReservationStatus::Released || returns_stock;
    if restocked && outcome == FinishOutcome::Applied {
        reopen_split_sku(redis, row.sku_id).await;
    }
    true
}

/// What a decided row's mirror does beyond its status (`finish.lua`).
fn finish_effect(row: &LedgerRow) -> FinishEffect {
    // A hold that lapsed unpaid counts against its buyer (`limits.max_lapsed_holds`).
    let lapsed = row.status == ReservationStatus::Released
        && row.reason.as_deref() == Some(ledger::reason::EXPIRED);
    if ledger::reason::rejection_returns_stock(row.reason.as_deref()) {
        FinishEffect::ReturnsStock
    } else if lapsed {
        FinishEffect::Lapsed
    } else {
        FinishEffect::Plain
    }
}

/// Clears a mirrored row's `redis_pending` flag.
async fn clear_pending(db: &Db, row: &LedgerRow) {
    let cleared = db.bounded(async {
        let mut conn = db.conn().await?;
        settle::clear_redis_pending(&mut conn, row.sku_id, &row.request_id).await
    });
    if let Err(err) = cleared.await {
        tracing::warn!(error = %err, "lifecycle.mirror: pending flag not cleared; mirror will repeat (idempotent)");
    }
}

/// A unit went back to one bucket of a split SKU: if other buckets were
/// drained meanwhile (their buyers refused SOLD_OUT), put stock back within
/// their reach now rather than at the reconciler's next pass.
pub(crate) async fn reopen_split_sku(redis: &RedisStore, sku_id: SkuId) {
    match redis.buckets().layout(sku_id).await {
        Ok(layout) if layout.is_split() => {}
        _ => return,
    }
    let now_secs = unix_ms() / 1000;
    if let Err(err) = super::rebalance::rebalance(redis, sku_id, now_secs).await {
        tracing::warn!(sku.id = %sku_id, error = %err, "lifecycle.mirror: rebalance after a release failed; the reconciler retries");
    }
}

/// The sweep's release: up to `limit` `RESERVED` rows of one SKU expired
/// before `cutoff_ms`, released in one transaction by one statement (SKU row
/// locked first; rows another closer holds are skipped). Returns the rows as they now are, for
/// the Redis mirror.
pub async fn release_expired(
    db: &Db,
    sku_id: SkuId,
    cutoff_ms: u64,
    limit: usize,
) -> Result<Vec<LedgerRow>, DbError> {
    let mut conn = db.conn().await?;
    let Some((mut tx, mut out)) = locate::begin_on_sku(db, &mut conn, sku_id).await? else {
        return Ok(Vec::new());
    };
    let rows = ledger::expired_for_update(&mut tx, sku_id, cutoff_ms, limit).await?;
    let now = unix_ms();
    // The locked read chose RESERVED rows expired before the caller's cutoff
    // (which a test's sweep may set ahead of the clock): each is released, as
    // the sweep always did.
    let winners = rows;
    let (target, why) = (Transition::Expire.target(), Transition::Expire.reason());
    settle::finish_many_locked(&mut tx, &winners, target, why, now, &mut out).await?;
    let released = (winners.into_iter())
        .map(|row| LedgerRow {
            status: target,
            reason: why.map(str::to_string),
            redis_pending: true,
            ..row
        })
        .collect();
    event_outbox::stage(&mut tx, out, now).await?;
    tx.commit().await.map_err(DbError::from)?;
    Ok(released)
}
