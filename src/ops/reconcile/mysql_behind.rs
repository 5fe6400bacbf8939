//! `MYSQL_BEHIND` (contract §8, docs/operations.md "MySQL failover"): work MySQL
//! acknowledged and then lost — a primary that failed over to an asynchronous
//! replica that had not applied it — while Redis still holds the proof.
//!
//! Two kinds of lost work, both read from one comparison of the stores:
//! - **lost deductions**: reservations Redis took (RESERVED or CONFIRMED) that
//!   the ledger lacks, once nothing can still be carrying them: the SKU's
//!   outbox is empty (so each was published and confirmed by the broker), the
//!   deduct and retry queues hold no ready message (so each was delivered),
//!   none is dead-lettered (that is `STUCK`), each is older than
//!   `reconcile.lost_after_ms`, and the same ids were unapplied at the look
//!   before — so a consumer holding one unacked would have had to hold it for
//!   the whole gap between two looks;
//! - **lost decisions**: rows MySQL holds as RESERVED whose Redis mirror is
//!   final (CONFIRMED or RELEASED), and RELEASED records without a row (MySQL
//!   lost the deduction and its release). Mirrors are written only after MySQL
//!   committed, so MySQL had decided and lost it. Seen on two looks as well,
//!   because a decision committed between a look's two reads forms the same
//!   pair for a moment.
//!
//! The repair re-applies each through the normal paths, so a mistaken verdict
//! costs nothing: a RESERVED record is re-published as its deduction (the
//! consumer skips one the ledger holds, and applies the over-admission rules to
//! one that no longer fits); a CONFIRMED record, and a lost confirm, go through
//! the lifecycle's confirm (which applies a missing deduction from the Redis
//! record first); a lost release through a cancel, or an expiry once the
//! reservation's time has passed (a lost deduction with its release is
//! recorded RELEASED, never taking stock). A lost order line (its record
//! names an order) is re-applied as its whole order, from the order record,
//! then the decision the line proves (`lifecycle::reapply_lost` of an `OrderHold`):
//! never as a single reservation. Every one of these is a repeat when
//! already done.
//!
//! A line of an order that is not committed in Redis is neither. A line of
//! an attempt in flight (held line by line, still `HOLDING` or `ABORTING`)
//! is the order sweeper's (`ops/order_sweeper.rs`) to undo: such lines are
//! left out of the lost work ([`leave_open_lines`]), counted, and logged
//! once one outlives `orders.hold_timeout_ms + orders.sweep_interval_ms`
//! (no sweeper is running). A line no sweeper will see — its intent lost
//! with its shard in a failover, `ABORTED` by an undo that missed it, or
//! superseded by a later attempt — is stranded: MySQL never had it (two
//! looks found no ledger row), so the repair gives its units back, as the
//! undo would have (`order_release.lua`), and the buyer's retry of the
//! order is held again instead of answered as a mismatch.

use std::collections::{HashMap, HashSet};

use crate::db::Db;
use crate::domain::{is_due, Deduction, RequestId, Requester, ReservationStatus, SkuId};
use crate::mq::Publisher;
use crate::ops::compare::{CompareError, Comparison, Unapplied};
use crate::ops::lifecycle::{self, OrderHold, SingleHold, Transition, TransitionOutcome};
use crate::redis::order_holds::Attempt;
use crate::redis::reservation::HeldRecord;
use crate::redis::RedisStore;

/// Deductions re-published per broker message (the consumer's batches are
/// about this size, and one message stays far below the frame limit).
const REPUBLISH_CHUNK: usize = 200;

/// Lost work of one SKU that two looks agree on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LostWork {
    /// Reservations Redis took that the ledger lacks.
    pub deductions: Vec<Unapplied>,
    /// Rows MySQL holds as RESERVED that Redis mirrors as final.
    pub decisions: Vec<(String, ReservationStatus)>,
}

impl LostWork {
    pub fn is_empty(&self) -> bool {
        self.deductions.is_empty() && self.decisions.is_empty()
    }

    /// Reservations lost, of both kinds.
    pub fn reservations(&self) -> i64 {
        (self.deductions.len() + self.decisions.len()) as i64
    }

    /// Units of the lost deductions (a lost decision moves no unit in MySQL's
    /// count of taken stock unless it was a release).
    pub fn units(&self) -> i64 {
        self.deductions.iter().map(|d| d.count).sum()
    }

    /// Request ids, to compare with the next look.
    pub fn ids(&self) -> HashSet<String> {
        let deductions = self.deductions.iter().map(|d| d.request_id.clone());
        let decisions = self.decisions.iter().map(|(id, _)| id.clone());
        deductions.chain(decisions).collect()
    }

    /// Only what `earlier` (the previous look's ids) also held.
    pub fn seen_before(self, earlier: &HashSet<String>) -> Self {
        Self {
            deductions: (self.deductions.into_iter())
                .filter(|d| earlier.contains(&d.request_id))
                .collect(),
            decisions: (self.decisions.into_iter())
                .filter(|(id, _)| earlier.contains(id))
                .collect(),
        }
    }
}

/// The lost work one look suggests: `drained` says whether the SKU's outbox
/// and the work queues were empty at this look; `dead` are the SKU's
/// dead-lettered request ids (STUCK, not lost).
pub fn suspects(
    obs: &Comparison,
    drained: bool,
    dead: Option<&HashMap<String, i64>>,
    now_ms: u64,
    lost_after_ms: u64,
) -> LostWork {
    let deductions = if drained {
        (obs.unapplied_records.iter())
            .filter(|r| r.created_ms > 0 && now_ms.saturating_sub(r.created_ms) >= lost_after_ms)
            .filter(|r| !dead.is_some_and(|d| d.contains_key(&r.request_id)))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let decisions = (obs.decided_in_redis_only.iter())
        .map(|d| (d.request_id.clone(), d.status))
        .collect();
    LostWork {
        deductions,
        decisions,
    }
}

/// What a line record's order says of it.
enum LineOf {
    /// Not a line: a single reservation.
    Single,
    /// A line of this order, committed in Redis (its record names the SKU).
    Committed(RequestId),
    /// A line of an attempt still in flight (`HOLDING` or `ABORTING`, the
    /// record's attempt): the sweeper's.
    Open,
    /// A line no sweeper will undo: its order's record is gone (lost with
    /// its shard in a failover, or expired), `ABORTED` (an undo that missed
    /// it), or a later attempt's. MySQL lacks it too (it is lost work: two
    /// looks found no ledger row), so the repair gives its units back.
    Stranded(Attempt),
}

/// Whether `held` (the record of `request_id` on `sku_id`) is a line, and of what.
async fn line_of(
    redis: &RedisStore,
    sku_id: SkuId,
    request_id: &RequestId,
    held: &HeldRecord,
) -> Result<LineOf, CompareError> {
    let Some(order) = held.order.as_deref() else {
        return Ok(LineOf::Single);
    };
    let Ok(order_id) = RequestId::parse(order) else {
        return Ok(LineOf::Open);
    };
    // `Orders::record` answers only a committed order (not HOLDING,
    // ABORTING, ABORTED, nor a record that is gone).
    let committed = redis.orders().record(&order_id).await?;
    if let Some(record) = committed {
        let names_sku = record.lines.lines().iter().any(|l| l.sku_id == sku_id);
        return Ok(if names_sku && &order_id == request_id {
            LineOf::Committed(order_id)
        } else {
            LineOf::Open
        });
    }
    // A line of `order.lua`'s one call has no attempt: its order record
    // comes with it, so one without is left alone.
    let Some(number) = held.attempt else {
        return Ok(LineOf::Open);
    };
    let in_flight = match redis.orders().intent_state(&order_id).await? {
        Some((status, attempt)) => {
            matches!(status.as_str(), "HOLDING" | "ABORTING") && attempt == Some(number)
        }
        None => false,
    };
    if in_flight {
        return Ok(LineOf::Open);
    }
    let line = &held.reservation;
    Ok(LineOf::Stranded(Attempt {
        order_id,
        user_id: line.user_id,
        number,
        created_ms: line.created_at_ms,
        expires_ms: line.expires_at_ms,
        // Long past: the undo's tombstone lives only its margin.
        deadline_ms: 0,
        requester: crate::domain::Requester::Anyone,
        carries_pass: false,
    }))
}

/// Takes out of `lost` the deductions whose record is a line of an order not
/// committed in Redis (module doc): the order sweeper undoes them. Each is
/// counted (`stockd_reconcile_open_order_lines_total`); one older than
/// `sweep_bound_ms` (`orders.hold_timeout_ms + orders.sweep_interval_ms`)
/// is logged: no sweeper undid it in time. Returns how many were left.
pub async fn leave_open_lines(
    redis: &RedisStore,
    sku_id: SkuId,
    lost: &mut LostWork,
    now_ms: u64,
    sweep_bound_ms: u64,
) -> Result<usize, CompareError> {
    let mut kept = Vec::with_capacity(lost.deductions.len());
    let mut open = 0;
    for deduction in std::mem::take(&mut lost.deductions) {
        let Ok(request_id) = RequestId::parse(&deduction.request_id) else {
            kept.push(deduction);
            continue;
        };
        let is_open = match redis.reservations().record(sku_id, &request_id).await? {
            Some(held) => matches!(
                line_of(redis, sku_id, &request_id, &held).await?,
                LineOf::Open
            ),
            None => false,
        };
        if !is_open {
            kept.push(deduction);
            continue;
        }
        open += 1;
        metrics::counter!("stockd_reconcile_open_order_lines_total").increment(1);
        let age_ms = now_ms.saturating_sub(deduction.created_ms);
        if age_ms > sweep_bound_ms {
            tracing::warn!(sku.id = %sku_id, order.id = %request_id, age_ms, bound_ms = sweep_bound_ms,
                "reconcile.mysql_behind: a line of an order not committed in Redis outlived orders.hold_timeout_ms + orders.sweep_interval_ms; left to the order sweeper (is an api node running?)");
        }
    }
    lost.deductions = kept;
    Ok(open)
}

/// What a repair did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reapplied {
    /// Deductions published again from their Redis records.
    pub republished: usize,
    /// Confirms, cancels and expiries applied again in MySQL.
    pub transitions: usize,
    /// Confirmed (paid) reservations MySQL could no longer take: the operator's
    /// case (docs/operations.md "MySQL failover").
    pub paid_rejected: usize,
    /// Stranded order lines given back (`LineOf::Stranded`).
    pub stranded_released: usize,
}

/// Re-applies `lost` (see the module doc). Records Redis no longer holds are
/// skipped: what they were cannot be proven.
pub async fn reapply(
    db: &Db,
    redis: &RedisStore,
    publisher: &Publisher,
    sku_id: SkuId,
    lost: &LostWork,
    now_ms: u64,
) -> Result<Reapplied, CompareError> {
    let mut done = Reapplied::default();
    let mut deductions = Vec::new();
    let mut orders_done = HashSet::new();
    for lost in &lost.deductions {
        let Some(held) = held_record_of(redis, sku_id, &lost.request_id).await? else {
            continue;
        };
        let line = Box::pin(line_of(redis, sku_id, &held.reservation.request_id, &held)).await?;
        let record = held.reservation;
        match line {
            LineOf::Single => {}
            LineOf::Committed(order_id) => {
                reapply_order(
                    db,
                    redis,
                    &order_id,
                    record.status,
                    now_ms,
                    &mut orders_done,
                )
                .await?;
                done.transitions += 1;
                continue;
            }
            // Never a single reservation: the sweeper's (leave_open_lines).
            LineOf::Open => continue,
            LineOf::Stranded(attempt) => {
                // Boxed: the repair's future is deep already (a test thread's
                // stack overflowed with this one inline).
                if Box::pin(redis.reservations().release_line(&attempt, sku_id)).await? {
                    lifecycle::reopen_split_sku(redis, sku_id).await;
                    done.stranded_released += 1;
                    metrics::counter!("stockd_reconcile_stranded_order_lines_total").increment(1);
                    tracing::warn!(sku.id = %sku_id, order.id = %attempt.order_id, attempt = attempt.number,
                        "reconcile.mysql_behind: a line of an order neither committed nor in flight (its intent lost or its undo missed) given back");
                }
                continue;
            }
        }
        match record.status {
            ReservationStatus::Reserved => deductions.push(Deduction::from(&record)),
            ReservationStatus::Confirmed => {
                let outcome = confirm(db, redis, sku_id, &record.request_id, now_ms).await?;
                done.transitions += 1;
                if matches!(outcome, TransitionOutcome::Conflict { row } if row.status == ReservationStatus::Rejected)
                {
                    done.paid_rejected += 1;
                    tracing::error!(sku.id = %sku_id, request.id = %record.request_id,
                        "reconcile.mysql_behind: a confirmed (paid) reservation lost by MySQL no longer fits and was REJECTED; settle it with the buyer");
                }
            }
            _ => {}
        }
    }
    for chunk in deductions.chunks(REPUBLISH_CHUNK) {
        publisher
            .publish_deductions(chunk)
            .await
            .map_err(|err| CompareError::Republish(err.to_string()))?;
        done.republished += chunk.len();
    }
    for (id, status) in &lost.decisions {
        let Some(record) = record_of(redis, sku_id, id).await? else {
            continue;
        };
        if let Some(order_id) = order_of_line(redis, sku_id, &record.request_id).await? {
            reapply_order(db, redis, &order_id, *status, now_ms, &mut orders_done).await?;
            done.transitions += 1;
            continue;
        }
        let transition = match status {
            ReservationStatus::Confirmed => Transition::Confirm,
            _ if is_due(record.expires_at_ms, now_ms) => Transition::Expire,
            _ => Transition::Cancel,
        };
        let hold = SingleHold {
            sku_id,
            request_id: &record.request_id,
        };
        lifecycle::transition(db, redis, &hold, transition, now_ms, &Requester::Anyone)
            .await
            .map_err(CompareError::from)?;
        done.transitions += 1;
    }
    if done != Reapplied::default() {
        tracing::warn!(sku.id = %sku_id, republished = done.republished, transitions = done.transitions,
            "reconcile.mysql_behind: work MySQL lost re-applied from the Redis records");
    }
    Ok(done)
}

/// The order `request_id` is a line of on `sku_id`, if it is one: an order
/// record of that id with a line of the SKU (a single reservation cannot
/// share a SKU and an id with an order line: both are the same record).
async fn order_of_line(
    redis: &RedisStore,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Result<Option<RequestId>, CompareError> {
    let record = redis.orders().record(request_id).await?;
    Ok(record
        .filter(|r| r.lines.lines().iter().any(|l| l.sku_id == sku_id))
        .map(|_| request_id.clone()))
}

/// Re-applies a lost order whole (once per repair, whichever of its lines
/// found it): `lifecycle::reapply_lost` of an `OrderHold`.
async fn reapply_order(
    db: &Db,
    redis: &RedisStore,
    order_id: &RequestId,
    proven: ReservationStatus,
    now_ms: u64,
    done: &mut HashSet<RequestId>,
) -> Result<(), CompareError> {
    if !done.insert(order_id.clone()) {
        return Ok(());
    }
    let hold = OrderHold { order_id };
    let reapplied = lifecycle::reapply_lost(db, redis, &hold, proven, now_ms)
        .await
        .map_err(CompareError::from)?;
    if !reapplied {
        tracing::warn!(order.id = %order_id,
            "reconcile.mysql_behind: an order MySQL lost has no Redis record left; not re-applied");
    }
    Ok(())
}

async fn record_of(
    redis: &RedisStore,
    sku_id: SkuId,
    id: &str,
) -> Result<Option<crate::domain::Reservation>, CompareError> {
    Ok(held_record_of(redis, sku_id, id)
        .await?
        .map(|held| held.reservation))
}

/// The record with the order it is a line of (its `order` field).
async fn held_record_of(
    redis: &RedisStore,
    sku_id: SkuId,
    id: &str,
) -> Result<Option<crate::redis::reservation::HeldRecord>, CompareError> {
    let Ok(request_id) = RequestId::parse(id) else {
        return Ok(None); // every stored id went through the parser on its way in
    };
    Ok(redis.reservations().record(sku_id, &request_id).await?)
}

async fn confirm(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    request_id: &RequestId,
    now_ms: u64,
) -> Result<TransitionOutcome, CompareError> {
    let hold = SingleHold { sku_id, request_id };
    lifecycle::transition(
        db,
        redis,
        &hold,
        Transition::Confirm,
        now_ms,
        &Requester::Anyone,
    )
    .await
    .map_err(CompareError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::compare::RedisDecided;

    fn unapplied(id: &str, created_ms: u64) -> Unapplied {
        Unapplied {
            request_id: id.into(),
            count: 2,
            created_ms,
            status: ReservationStatus::Reserved,
        }
    }

    fn observation(records: Vec<Unapplied>, decided: Vec<RedisDecided>) -> Comparison {
        Comparison {
            unapplied_records: records,
            decided_in_redis_only: decided,
            ..Comparison::sample(10, 10, 0, None, 0)
        }
    }

    const NOW_MS: u64 = 100_000;
    const AFTER_MS: u64 = 10_000;

    #[test]
    fn only_old_undead_records_of_a_drained_pipeline_are_suspects() {
        let obs = observation(
            vec![
                unapplied("old", NOW_MS - 20_000),
                unapplied("young", NOW_MS - 1_000),
                unapplied("dead", NOW_MS - 20_000),
                unapplied("untimed", 0),
            ],
            Vec::new(),
        );
        let dead: HashMap<String, i64> = [("dead".to_string(), 2)].into();
        let found = suspects(&obs, true, Some(&dead), NOW_MS, AFTER_MS);
        let ids: Vec<&str> = found
            .deductions
            .iter()
            .map(|d| d.request_id.as_str())
            .collect();
        assert_eq!(ids, ["old"]);
        assert_eq!((found.reservations(), found.units()), (1, 2));
        assert!(suspects(&obs, false, None, NOW_MS, AFTER_MS).is_empty());
    }

    #[test]
    fn lost_decisions_need_no_drained_pipeline_but_two_looks() {
        let decided = RedisDecided {
            request_id: "paid".into(),
            status: ReservationStatus::Confirmed,
        };
        let obs = observation(vec![unapplied("old", 1)], vec![decided]);
        let first = suspects(&obs, false, None, NOW_MS, AFTER_MS);
        assert_eq!(first.decisions.len(), 1);
        assert!(first.clone().seen_before(&HashSet::new()).is_empty());
        let earlier = first.ids();
        let second = suspects(&obs, true, None, NOW_MS, AFTER_MS).seen_before(&earlier);
        // "old" was not a suspect at the first look (pipeline not drained).
        assert_eq!((second.deductions.len(), second.decisions.len()), (0, 1));
    }
}
