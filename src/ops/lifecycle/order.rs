//! The lifecycle of a whole order (docs/architecture.md, "Orders"): confirm,
//! cancel, expire. MySQL decides, as for a single reservation, in one
//! transaction under the ledger lock protocol: every line's SKU row in
//! ascending id order, then the order row, then the line rows; the order row
//! takes the one conditional update that decides (pay and expiry racing have
//! one winner), and every line follows it in the same transaction, so no
//! order is ever half confirmed or half released. Then Redis mirrors each
//! line (`finish.lua`, stock and quota back exactly once) and the order
//! record (`order_mark.lua`).
//!
//! Order of arrival never matters: an order the consumer has not applied yet
//! is applied first, whole, from its Redis record, exactly as the consumer
//! would, and told in the same transaction (`ledger::apply_batch_told`,
//! `Telling::InOutbox`: the consumer's late duplicate tells the same body).
//!
//! Orders belong to their client (contract §6.2): a client asking about
//! another client's order finds it nowhere (`NotFound`), judged on the row
//! or, before the consumer applied it, on the Redis record the first step
//! reads anyway — before anything is applied or moved. (An order's client
//! never changes once written, so the unlocked read decides.)

use super::{mirror, retried, within_query_bound, LifecycleError, Transition};
use crate::db::ledger::{self, settle, LedgerRow};
use crate::db::orders::{self, OrderRow};
use crate::db::{event_outbox, sku, Db, DbError};
use crate::domain::{is_due, Deduction, RequestId, Requester, ReservationStatus};
use crate::events::{Event, OrderFacts};
use crate::redis::RedisStore;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderTransitionOutcome {
    /// The order is in the target state (now, or already: a repeat).
    Done { order: OrderRow, changed: bool },
    /// The order ended another way; `order.status` says how.
    Conflict { order: OrderRow },
    /// An expiry before the order's time (it stays).
    NotYetExpired,
    /// No such order in MySQL or Redis.
    NotFound,
}

/// Applies `transition` to a whole order: MySQL first, then the mirrors.
/// Asked by `requester`: another client's order is
/// [`OrderTransitionOutcome::NotFound`], nothing written;
/// [`Requester::Anyone`] for stockd's own roles and with `auth.required` false.
pub async fn transition_order(
    db: &Db,
    redis: &RedisStore,
    order_id: &RequestId,
    transition: Transition,
    now_ms: u64,
    requester: &Requester,
) -> Result<OrderTransitionOutcome, LifecycleError> {
    // Boxed, as `lifecycle::transition` is: the reconciler awaits it deep
    // in its own future.
    Box::pin(async move {
        let known = match find_or_apply(db, redis, order_id, requester).await? {
            InMysql::Missing => return Ok(OrderTransitionOutcome::NotFound),
            InMysql::Known(row) => Some(row),
            InMysql::AppliedNow => None,
        };
        let asked = transition;
        let transition =
            super::order_recovered::proven_transition(db, redis, order_id, known, asked, now_ms)
                .await?;
        let decision = retried(|| decide(db, order_id, transition, now_ms));
        let (outcome, lines) = within_query_bound(db, decision).await?;
        if let OrderTransitionOutcome::Done {
            order,
            changed: true,
        } = &outcome
        {
            for line in &lines {
                mirror(db, redis, line).await;
            }
            if let Err(err) = redis.orders().mark(order_id, order.status).await {
                crate::health::outage::failed("redis", &err);
            }
        }
        Ok(match outcome {
            // A cancel or expiry that found the payment decided (lost by MySQL,
            // proven by the record): the payment won.
            OrderTransitionOutcome::Done { order, .. } if transition != asked => {
                OrderTransitionOutcome::Conflict { order }
            }
            other => other,
        })
    })
    .await
}

/// Whether MySQL has the order, after applying it whole from its Redis
/// record when only Redis has it (the consumer is behind).
/// `requester`: another client's order is not there.
pub(super) async fn applied_or_applies(
    db: &Db,
    redis: &RedisStore,
    order_id: &RequestId,
    requester: &Requester,
) -> Result<bool, LifecycleError> {
    Ok(!matches!(
        find_or_apply(db, redis, order_id, requester).await?,
        InMysql::Missing
    ))
}

/// What [`find_or_apply`] found.
pub(super) enum InMysql {
    /// MySQL had the order: its row as read (unlocked).
    Known(OrderRow),
    /// Only Redis had it; it was applied from the record just now.
    AppliedNow,
    /// Neither store has it (or it is another client's).
    Missing,
}

/// The order's row, or the order applied whole from its Redis record when
/// only Redis has it (the consumer is behind).
async fn find_or_apply(
    db: &Db,
    redis: &RedisStore,
    order_id: &RequestId,
    requester: &Requester,
) -> Result<InMysql, LifecycleError> {
    let known = db
        .bounded(async {
            let mut conn = db.conn().await?;
            orders::find(&mut conn, order_id).await
        })
        .await?;
    if let Some(row) = known {
        if !requester.may_act_on(row.client.as_deref()) {
            return Ok(InMysql::Missing);
        }
        return Ok(InMysql::Known(row));
    }
    let Some(record) = redis.orders().record(order_id).await? else {
        return Ok(InMysql::Missing);
    };
    if !requester.may_act_on(record.client.as_deref()) {
        return Ok(InMysql::Missing);
    }
    let lines = Deduction::of_order_by(
        order_id,
        record.user_id,
        &record.lines,
        record.created_ms,
        record.expires_ms,
        record.client.as_deref(),
    );
    let retries = super::TRANSITION_RETRIES;
    let telling = ledger::Telling::InOutbox;
    db.bounded(ledger::apply_batch_told(db, &lines, retries, telling))
        .await?;
    Ok(InMysql::AppliedNow)
}

/// One attempt: the decision and the line rows as they are after it.
async fn decide(
    db: &Db,
    order_id: &RequestId,
    transition: Transition,
    now_ms: u64,
) -> Result<(OrderTransitionOutcome, Vec<LedgerRow>), LifecycleError> {
    let mut conn = db.conn().await?;
    let Some(unlocked) = orders::find(&mut conn, order_id).await? else {
        return Ok((OrderTransitionOutcome::NotFound, Vec::new()));
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
        return Ok((OrderTransitionOutcome::NotFound, Vec::new()));
    };
    let target = transition.target();
    let settled = if order.status == target {
        Some(OrderTransitionOutcome::Done {
            order: order.clone(),
            changed: false,
        })
    } else if order.status != ReservationStatus::Reserved {
        Some(OrderTransitionOutcome::Conflict {
            order: order.clone(),
        })
    } else if transition == Transition::Expire && !is_due(order.expires_at_ms, now_ms) {
        Some(OrderTransitionOutcome::NotYetExpired)
    } else {
        None
    };
    if let Some(outcome) = settled {
        return Ok((outcome, Vec::new()));
    }
    let why = transition.reason();
    let mut lines = Vec::with_capacity(order.lines.len());
    let mut kind = None;
    for line in order.lines.lines() {
        let row = ledger::find_for_update(&mut tx, line.sku_id, order_id)
            .await?
            .expect("a RESERVED order has a ledger row per line");
        let change = settle::finish_row_locked(&mut tx, &row, target, why, now_ms, &mut out);
        kind = Some(change.await?);
        lines.push(LedgerRow {
            status: target,
            reason: why.map(str::to_string),
            redis_pending: true,
            ..row
        });
    }
    orders::finish_locked(&mut tx, order_id, target, why, now_ms).await?;
    if let Some(kind) = kind.filter(|k| out.wants(k.of_order())) {
        let facts = OrderFacts {
            order_id,
            user_id: order.user_id,
            lines: &order.lines,
            created_ms: order.reserved_at_ms,
            expires_ms: order.expires_at_ms,
        };
        let event = Event::order(kind, &facts, |sku| out.available(sku), why, None, now_ms);
        out.push(event);
    }
    event_outbox::stage(&mut tx, out, now_ms).await?;
    tx.commit().await.map_err(DbError::from)?;
    let order = OrderRow {
        status: target,
        reason: why.map(str::to_string),
        ..order
    };
    Ok((
        OrderTransitionOutcome::Done {
            order,
            changed: true,
        },
        lines,
    ))
}
