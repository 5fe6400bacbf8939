//! Expiries released in batches (issue 55): the closer's delay queue hands
//! over expiries that fell due together, and releasing them one transaction
//! and one Redis call each ran at a fifth of the admission rate.
//!
//! A batch of one SKU's reservations takes the single path's steps, each once
//! for the lot, with the single path's own rules:
//! 1. one read of the rows, and for each the check of its Redis mirror for a
//!    decision MySQL lost (`recovered::proven`, the same rule),
//!    [`MIRROR_READS_AT_ONCE`] of those reads in flight at a time;
//! 2. one transaction under the ledger lock protocol: the SKU row first, then
//!    the batch's rows in one `SELECT … FOR UPDATE` in request-id order; each
//!    row decided by `settled_already` (the one-winner rule: a confirm or an
//!    extension that committed first leaves it CONFIRMED or not yet due); the
//!    winners released by one statement (`settle::finish_many_locked`), their
//!    events staged through the same outbox;
//! 3. the Redis mirror in one `finish.lua` call per bucket ([`mirror_many`]),
//!    the pending flags cleared in one statement.
//!
//! What a batch cannot decide the usual way — a reservation the consumer has
//! not applied yet, an order line, a decision MySQL lost — goes the single
//! path ([`transition`]), which handles each of those.

use std::collections::{BTreeMap, HashMap};

use super::hold::TransitionOutcome;
use super::mirror::{finish_effect, reopen_split_sku};
use super::transition::{settled_already, transition};
use super::{
    locate, recovered, retried, within_query_bound, LifecycleError, SingleHold, Transition,
};
use crate::clock::unix_ms;
use crate::db::ledger::{self, settle, LedgerRow};
use crate::db::{event_outbox, Db, DbError};
use crate::domain::{RequestId, Requester, ReservationStatus, SkuId};
use crate::redis::{FinishEffect, FinishItem, FinishOutcome, RedisStore};

/// Redis reads of the rows' mirrors in flight at once (step 1): enough to
/// hide the round trip, few next to the Redis pool.
const MIRROR_READS_AT_ONCE: usize = 16;

/// Expires `ids` of one SKU at `now_ms`: one outcome per id, in order, each
/// the one [`super::transition`] would give (a repeated id, the same).
pub async fn expire_many(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    ids: &[RequestId],
    now_ms: u64,
) -> Result<Vec<TransitionOutcome>, LifecycleError> {
    let mut unique: Vec<RequestId> = ids.to_vec();
    unique.sort();
    unique.dedup();
    let decision = decide_many(db, redis, sku_id, &unique, now_ms);
    let Decided {
        mut outcomes,
        alone,
    } = within_query_bound(db, Box::pin(decision)).await?;
    let to_mirror: Vec<LedgerRow> = (outcomes.values())
        .filter_map(|outcome| match outcome {
            TransitionOutcome::Done { row, changed: true } => Some(row.clone()),
            // As the single path: a REJECTED row's quota back in Redis (idempotent).
            TransitionOutcome::Conflict { row } if row.status == ReservationStatus::Rejected => {
                Some(row.clone())
            }
            _ => None,
        })
        .collect();
    mirror_many(db, redis, &to_mirror).await;
    for id in alone {
        let hold = SingleHold {
            sku_id,
            request_id: &id,
        };
        let (expire, anyone) = (Transition::Expire, &Requester::Anyone);
        let outcome = transition(db, redis, &hold, expire, now_ms, anyone).await?;
        outcomes.insert(id, outcome);
    }
    Ok(ids
        .iter()
        .map(|id| {
            outcomes
                .get(id)
                .cloned()
                .unwrap_or(TransitionOutcome::NotFound)
        })
        .collect())
}

/// What the batch decided, and the ids left to the single path.
struct Decided {
    outcomes: HashMap<RequestId, TransitionOutcome>,
    alone: Vec<RequestId>,
}

/// Steps 1 and 2 of the module doc, retrying deadlocks as the single path.
async fn decide_many(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    ids: &[RequestId],
    now_ms: u64,
) -> Result<Decided, LifecycleError> {
    let rows = db
        .bounded(async {
            let mut conn = db.conn().await?;
            ledger::find_many(&mut conn, sku_id, ids).await
        })
        .await?;
    let rows: HashMap<RequestId, LedgerRow> = rows
        .into_iter()
        .map(|r| (r.request_id.clone(), r))
        .collect();
    let mut batch = Vec::with_capacity(ids.len());
    let mut alone = Vec::new();
    let wanted = Transition::Expire;
    // Each row's mirror is read on its own (its own rule), several at once:
    // one after the other, a storm's batch of 500 waited 500 round trips.
    let mut proven: Vec<Option<Transition>> = Vec::with_capacity(ids.len());
    for window in ids.chunks(MIRROR_READS_AT_ONCE) {
        let reads = window
            .iter()
            .map(|id| proof(db, redis, sku_id, rows.get(id), now_ms));
        for read in futures_util::future::join_all(reads).await {
            proven.push(read?);
        }
    }
    for (id, proof) in ids.iter().zip(proven) {
        match proof {
            Some(proven) if proven == wanted => batch.push(id.clone()),
            // Not applied yet, an order line, or a decision MySQL lost
            // (re-applied alone).
            _ => alone.push(id.clone()),
        }
    }
    let (outcomes, missing) = retried(|| decide_locked(db, sku_id, &batch, now_ms)).await?;
    alone.extend(missing);
    Ok(Decided { outcomes, alone })
}

/// Step 1 for one row: the transition its Redis mirror proves, `None`
/// without a row (not applied yet, or an order line).
async fn proof(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    row: Option<&LedgerRow>,
    now_ms: u64,
) -> Result<Option<Transition>, LifecycleError> {
    let Some(row) = row else {
        return Ok(None);
    };
    let hold = SingleHold {
        sku_id,
        request_id: &row.request_id,
    };
    let wanted = Transition::Expire;
    let proven = recovered::proven(db, redis, &hold, Some(row), wanted, now_ms).await?;
    Ok(Some(proven))
}

/// One attempt at the locked decision of `ids` (rows known to exist): the
/// outcomes, and the ids whose row the locked read did not find.
async fn decide_locked(
    db: &Db,
    sku_id: SkuId,
    ids: &[RequestId],
    now_ms: u64,
) -> Result<(HashMap<RequestId, TransitionOutcome>, Vec<RequestId>), LifecycleError> {
    let mut outcomes = HashMap::with_capacity(ids.len());
    if ids.is_empty() {
        return Ok((outcomes, Vec::new()));
    }
    let mut conn = db.conn().await?;
    let Some((mut tx, mut out)) = locate::begin_on_sku(db, &mut conn, sku_id).await? else {
        return Ok((outcomes, ids.to_vec())); // the single path says NotFound
    };
    let locked = ledger::find_many_for_update(&mut tx, sku_id, ids).await?;
    let mut winners = Vec::new();
    for row in locked {
        match settled_already(&row, Transition::Expire, now_ms) {
            Some(outcome) => {
                outcomes.insert(row.request_id.clone(), outcome);
            }
            None => winners.push(row),
        }
    }
    let why = Transition::Expire.reason();
    let target = Transition::Expire.target();
    settle::finish_many_locked(&mut tx, &winners, target, why, now_ms, &mut out).await?;
    event_outbox::stage(&mut tx, out, now_ms).await?;
    tx.commit().await.map_err(DbError::from)?;
    for row in winners {
        let row = LedgerRow {
            status: target,
            reason: why.map(str::to_string),
            redis_pending: true,
            ..row
        };
        let id = row.request_id.clone();
        outcomes.insert(id, TransitionOutcome::Done { row, changed: true });
    }
    let missing = (ids.iter())
        .filter(|id| !outcomes.contains_key(*id))
        .cloned()
        .collect();
    Ok((outcomes, missing))
}

/// [`super::mirror`] for many decided rows: one `finish.lua` call per SKU
/// bucket and final state (`RedisStore`'s `finish_many`), the split SKU
/// reopened once, the pending flags cleared in one statement per SKU. A
/// group Redis failed stays pending for the sweep. Returns the rows mirrored.
pub async fn mirror_many(db: &Db, redis: &RedisStore, rows: &[LedgerRow]) -> usize {
    let mut groups: BTreeMap<(SkuId, &'static str, u8), Vec<&LedgerRow>> = BTreeMap::new();
    for row in rows {
        let effect = finish_effect(row);
        let key = (row.sku_id, row.status.as_str(), effect as u8);
        groups.entry(key).or_default().push(row);
    }
    let mut mirrored: BTreeMap<SkuId, Vec<RequestId>> = BTreeMap::new();
    for ((sku_id, _, _), group) in groups {
        let (status, effect) = (group[0].status, finish_effect(group[0]));
        let items: Vec<FinishItem> = (group.iter())
            .map(|row| FinishItem {
                request_id: row.request_id.clone(),
                user_id: row.user_id,
                count: row.count,
            })
            .collect();
        let reservations = redis.reservations();
        let outcomes = match reservations
            .finish_many(sku_id, &items, status, effect)
            .await
        {
            Ok(outcomes) => outcomes,
            Err(err) => {
                crate::health::outage::failed("redis", &err);
                continue;
            }
        };
        if effect == FinishEffect::Lapsed {
            let counted = outcomes.iter().filter(|o| **o != FinishOutcome::Already);
            metrics::counter!("stockd_holds_lapsed_total").increment(counted.count() as u64);
        }
        let restocked =
            status == ReservationStatus::Released || effect == FinishEffect::ReturnsStock;
        if restocked && outcomes.contains(&FinishOutcome::Applied) {
            reopen_split_sku(redis, sku_id).await;
        }
        let ids = group.iter().map(|row| row.request_id.clone());
        mirrored.entry(sku_id).or_default().extend(ids);
    }
    let mut count = 0;
    for (sku_id, ids) in mirrored {
        count += ids.len();
        let cleared = db.bounded(async {
            let mut conn = db.conn().await?;
            settle::clear_redis_pending_many(&mut conn, sku_id, &ids).await
        });
        if let Err(err) = cleared.await {
            tracing::warn!(sku.id = %sku_id, error = %err, "lifecycle.mirror: pending flags not cleared; mirrors will repeat (idempotent)");
        }
    }
    count
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
