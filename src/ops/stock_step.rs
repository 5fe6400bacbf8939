//! The Redis step of a stock movement (an adjustment, a `PUT` that changes
//! the total, a creation): exactly once in both stores, whatever fails and
//! however often the caller retries (issue 51; docs/architecture.md,
//! "Adjustments exactly once").
//!
//! The two stores move in an order chosen by the sign, so that Redis is
//! never *ahead* of MySQL (units it could sell that MySQL does not have:
//! buyers answered 201 then `REJECTED OVER_ADMITTED`), only briefly behind:
//! - a **restock** (δ > 0, and a creation) commits in MySQL first, its
//!   movement marked `redis_pending` with a step id, then applies to Redis
//!   keyed by that id ([`apply_restock`]) and clears the mark. A caller that
//!   went away, or a Redis that failed, leaves the mark; a retry of the same
//!   `adjustment_id` or the [`sweep`] applies it, once (the step's marker).
//! - a **cut** (δ < 0) is taken from Redis first, under the SKU row lock and
//!   after every fallible MySQL step but the commit, because only Redis knows
//!   what it already promised; the take is recorded in `<p>{sku}:cuts`. A
//!   commit that succeeded keeps it; one that failed, or whose outcome is
//!   unknown, is settled under the row lock by [`settle_cut`]: kept when the
//!   movement is in MySQL, given back when it is not. The [`sweep`] settles
//!   what a caller left.
//!
//! Bound: a restock or a cut leaves Redis behind by its units for at most
//! the operation bound (`mysql.query_timeout_ms`) plus one reconcile pass
//! (`reconcile.interval_ms`), the sweep running first in every pass.
//!
//! Only a creation loads a SKU Redis does not hold; any other step answers
//! `NotLoaded` and waits for warm-up, which brings the buyer state back and
//! records (`mv`) the last movement it counted, so steps still pending for
//! those movements move nothing.

use crate::db::movement_steps::{self, PendingStep};
use crate::db::{ledger, sku, Db, DbError};
use crate::domain::SkuId;
use crate::ops::sku_admin_error::SkuAdminError;
use crate::ops::sku_layout::layout_for;
use crate::redis::buckets::Layout;
use crate::redis::{LoadMode, LoadOutcome, RedisStore, Settled, Skus, Step};

/// Pending restocks one sweep applies at most; the rest wait a pass.
const SWEEP_BATCH: usize = 100;

/// A fresh id for one attempt's Redis step (32 hex characters: fits
/// `stock_movements.redis_op` and a Redis key).
pub fn new_op() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// What became of a restock's Redis step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Redis has the units (now, before, or through a warm-up).
    Done,
    /// Redis does not hold the SKU: the step waits for warm-up.
    NotLoaded,
}

/// Applies the Redis step of the committed restock `step` in `layout` with
/// the SKU's current limit, and marks it done in MySQL. Idempotent.
pub async fn apply_restock(
    db: &Db,
    redis: &RedisStore,
    layout: &Layout,
    step: &PendingStep,
    limit_per_user: u32,
) -> Result<Applied, SkuAdminError> {
    let mode = if step.create {
        LoadMode::Create
    } else {
        LoadMode::Move
    };
    let outcome = redis
        .skus()
        .load_sku(
            layout,
            step.delta,
            step.available_after,
            u64::from(limit_per_user),
            step.total_after.max(0) as u64,
            Step {
                op: &step.redis_op,
                mode,
                movement_id: step.movement_id,
                record_cut: false,
            },
        )
        .await?;
    match outcome {
        LoadOutcome::Loaded { .. } | LoadOutcome::Included => {}
        LoadOutcome::NotLoaded => return Ok(Applied::NotLoaded),
        LoadOutcome::Layout => {
            return Err(SkuAdminError::BucketsLocked(
                "the bucket count changed in Redis meanwhile; retry".into(),
            ))
        }
        LoadOutcome::BelowReserved { .. } => {
            return Err(SkuAdminError::Redis(crate::redis::RedisError::BadReply(
                "a restock refused as a cut".into(),
            )))
        }
    }
    db.bounded(async {
        let mut conn = db.conn().await?;
        movement_steps::mark_done(&mut conn, step.movement_id).await
    })
    .await?;
    Ok(Applied::Done)
}

/// Settles the cut `op` of `sku` whose caller could not tell whether it
/// committed: under the SKU row lock (so its own transaction is over), kept
/// when its movement is in MySQL, given back when not.
pub async fn settle_cut(
    db: &Db,
    skus: &Skus,
    sku_id: SkuId,
    op: &str,
) -> Result<Settled, SkuAdminError> {
    let settled = db
        .bounded(async {
            let mut conn = db.conn().await?;
            let mut tx = conn.start_transaction(ledger::tx_opts()).await?;
            sku::lock(&mut tx, sku_id).await?;
            let committed = movement_steps::committed(&mut tx, sku_id, op).await?;
            let settled = skus.settle_cut(sku_id, op, committed).await;
            tx.rollback().await?;
            Ok::<_, DbError>(settled)
        })
        .await??;
    if settled == Settled::Given {
        tracing::info!(sku.id = %sku_id, step.id = op,
            "stock_step.settle: a cut that did not commit was given back in Redis");
    }
    Ok(settled)
}

/// Whether a movement of `sku` is between its two stores: a restock not yet
/// in Redis, or a cut Redis took and has not settled. The reconciler does
/// not repair a `REDIS_BEHIND` meanwhile (the step will close the gap).
pub async fn in_progress(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
) -> Result<bool, SkuAdminError> {
    if !redis.skus().unsettled_cuts(sku_id).await?.is_empty() {
        return Ok(true);
    }
    let pending = db
        .bounded(async {
            let mut conn = db.conn().await?;
            movement_steps::any_pending(&mut conn, sku_id).await
        })
        .await?;
    Ok(pending)
}

/// What one sweep finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub restocks_applied: usize,
    pub cuts_settled: usize,
}

/// Finishes the steps callers left: restocks committed at least
/// `older_than_ms` ago whose Redis step is pending, and cuts of `skus` taken
/// at least as long ago and not settled. A step that fails is logged and
/// left for the next sweep.
pub async fn sweep(
    db: &Db,
    redis: &RedisStore,
    skus: &[SkuId],
    older_than_ms: u64,
) -> Result<Swept, SkuAdminError> {
    let before_ms = crate::clock::unix_ms().saturating_sub(older_than_ms);
    let mut swept = Swept::default();
    let pending = db
        .bounded(async {
            let mut conn = db.conn().await?;
            movement_steps::pending(&mut conn, before_ms, SWEEP_BATCH).await
        })
        .await?;
    for step in pending {
        let row = db
            .bounded(async {
                let mut conn = db.conn().await?;
                sku::get(&mut conn, step.sku_id).await
            })
            .await?;
        let Some(row) = row else { continue };
        // A creation may be the SKU's first load: its layout from MySQL's
        // bucket count; any other step moves the layout Redis has.
        let layout = if step.create {
            let limit = u64::from(row.limit_per_user);
            layout_for(redis, step.sku_id, row.buckets, limit).await
        } else {
            redis
                .buckets()
                .read_layout(step.sku_id)
                .await
                .map(|l| (*l).clone())
                .map_err(Into::into)
        };
        let applied = match layout {
            Ok(layout) if step.create => {
                // A creation the PUT could not bring to Redis: its sale terms
                // first, so it never sells outside its window (contract §19).
                match mirror_terms(db, redis, &layout).await {
                    Ok(()) => apply_restock(db, redis, &layout, &step, row.limit_per_user).await,
                    Err(err) => Err(err),
                }
            }
            Ok(layout) => apply_restock(db, redis, &layout, &step, row.limit_per_user).await,
            Err(err) => Err(err),
        };
        match applied {
            Ok(Applied::Done) => swept.restocks_applied += 1,
            Ok(Applied::NotLoaded) => {}
            Err(err) => tracing::warn!(sku.id = %step.sku_id, movement.id = step.movement_id,
                error = %err, "stock_step.sweep: a restock's Redis step failed; next pass"),
        }
    }
    for &sku_id in skus {
        for (op, taken_ms) in redis.skus().unsettled_cuts(sku_id).await? {
            if taken_ms > before_ms {
                continue; // its caller is still within the bound
            }
            match settle_cut(db, redis.skus(), sku_id, &op).await {
                Ok(_) => swept.cuts_settled += 1,
                Err(err) => tracing::warn!(sku.id = %sku_id, step.id = %op, error = %err,
                    "stock_step.sweep: a cut was not settled; next pass"),
            }
        }
    }
    Ok(swept)
}

/// The SKU's sale terms from MySQL onto every hash of `layout`.
async fn mirror_terms(db: &Db, redis: &RedisStore, layout: &Layout) -> Result<(), SkuAdminError> {
    let terms = db
        .bounded(async {
            let mut conn = db.conn().await?;
            crate::db::sale::terms(&mut conn, layout.sku()).await
        })
        .await?
        .unwrap_or_default();
    Ok(redis.skus().set_sale_terms(layout, &terms).await?)
}
