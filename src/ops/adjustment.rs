//! Adjusting a SKU's stock during a live sale
//! (`POST /v1/admin/skus/{id}/adjustments`): add or remove units in both
//! stores by a delta, never by setting a value, so the reservations Redis is
//! admitting meanwhile and the deductions the consumer is applying are
//! neither refused nor clobbered.
//!
//! MySQL decides, under the SKU row lock every ledger writer takes first:
//! - an `adjustment_id` seen before answers the recorded movement again
//!   (idempotent, finishing its Redis step if a failure left it pending), or
//!   a mismatch when the body differs;
//! - `expected_available` makes it a compare-and-set against MySQL's
//!   available (the ledger's count, `mysql_available` in the admin view):
//!   `Stale` with the current value when it moved;
//! - the total never passes `TOTAL_STOCK_MAX` (`AboveCap`, as the admin
//!   `PUT` refuses such a total: 400, nothing written);
//! - the total never drops below what is live (`BelowReserved`), and Redis
//!   refuses a cut deeper than what it has not promised yet;
//! - a SKU Redis does not hold is refused (`NotLoaded`, 503) until warm-up
//!   loaded it with its buyer state.
//!
//! Which store moves first depends on the sign, so a failure at any point
//! leaves Redis behind, never ahead, and the retry or the sweep finishes the
//! movement exactly once: see [`super::stock_step`].

use crate::db::movement_steps::{self, PendingStep};
use crate::db::movements::{self, Movement, MovementKind, NewMovement};
use crate::db::{event_outbox, ledger, sku, Db, DbError};
use crate::domain::SkuId;
use crate::ops::sku_admin::{self, Totals};
use crate::ops::sku_admin_error::SkuAdminError;
use crate::ops::sku_layout::layout_for;
use crate::ops::stock_step::{self, Applied};
use crate::redis::RedisStore;

/// One adjustment as asked.
#[derive(Debug, Clone)]
pub struct Adjustment<'a> {
    pub delta: i64,
    pub reason: &'a str,
    pub reference: Option<&'a str>,
    pub expected_available: Option<i64>,
    pub adjustment_id: Option<&'a str>,
    /// Who asked: a client's name or `admin-token`.
    pub actor: &'a str,
}

/// What became of an adjustment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Adjusted {
    /// Applied now.
    Applied(Movement),
    /// The `adjustment_id` was applied before: its movement, unchanged.
    Replayed(Movement),
}

#[derive(Debug, thiserror::Error)]
pub enum AdjustError {
    #[error("SKU {0} does not exist")]
    UnknownSku(u64),
    #[error("available is {current}, not the expected {expected}")]
    Stale { expected: i64, current: i64 },
    #[error(
        "adjustment_id {0} was applied with another delta, reason or reference; \
         use a new id for a new adjustment"
    )]
    Mismatch(String),
    #[error("the total would be {total}, past the most one SKU may hold ({max})")]
    AboveCap { total: i64, max: i64 },
    #[error(transparent)]
    Admin(#[from] SkuAdminError),
    #[error(transparent)]
    Db(#[from] DbError),
}

impl From<crate::redis::RedisError> for AdjustError {
    fn from(err: crate::redis::RedisError) -> Self {
        Self::Admin(SkuAdminError::Redis(err))
    }
}

/// Applies `adj` to the SKU in MySQL and Redis, within `mysql.query_timeout_ms`.
pub async fn adjust(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    adj: &Adjustment<'_>,
) -> Result<Adjusted, AdjustError> {
    let op = stock_step::new_op();
    let bounded = tokio::time::timeout(
        db.operation_bound(),
        adjust_unbounded(db, redis, sku_id, adj, &op),
    )
    .await;
    match bounded {
        Ok(result) => result,
        Err(_) => {
            if adj.delta < 0 {
                settle_later(db, redis, sku_id, op);
            }
            Err(AdjustError::Db(DbError::QueryTimeout))
        }
    }
}

/// A cut whose call ran out of time may have been taken in Redis: settle it
/// now rather than at the next sweep (nothing to do when it was not taken).
fn settle_later(db: &Db, redis: &RedisStore, sku_id: SkuId, op: String) {
    let (db, skus) = (db.clone(), redis.skus().clone());
    tokio::spawn(async move {
        if let Err(err) = stock_step::settle_cut(&db, &skus, sku_id, &op).await {
            tracing::warn!(sku.id = %sku_id, step.id = %op, error = %err,
                "admin.adjustment: the cut is left to the sweep");
        }
    });
}

async fn adjust_unbounded(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    adj: &Adjustment<'_>,
    op: &str,
) -> Result<Adjusted, AdjustError> {
    let mut conn = db.conn().await?;
    let mut tx = conn
        .start_transaction(ledger::tx_opts())
        .await
        .map_err(DbError::from)?;
    let row = sku::lock(&mut tx, sku_id)
        .await?
        .ok_or(AdjustError::UnknownSku(sku_id.get()))?;
    if let Some(id) = adj.adjustment_id {
        if let Some(seen) = movements::by_adjustment_id(&mut tx, sku_id, id).await? {
            tx.rollback().await.map_err(DbError::from)?;
            return replay(db, redis, seen, adj, row.limit_per_user).await;
        }
    }
    if redis.skus().sku(sku_id).await?.is_none() {
        return Err(SkuAdminError::NotLoaded(sku_id.get()).into());
    }
    if let Some(expected) = adj.expected_available {
        if expected != row.available_stock {
            return Err(AdjustError::Stale {
                expected,
                current: row.available_stock,
            });
        }
    }
    let total = crate::domain::stock::total_within_cap(row.total_stock, adj.delta).ok_or(
        AdjustError::AboveCap {
            total: row.total_stock.saturating_add(adj.delta),
            max: crate::domain::TOTAL_STOCK_MAX,
        },
    )?;
    if total < row.reserved() {
        return Err(SkuAdminError::BelowReserved {
            requested: total,
            reserved: row.reserved(),
        }
        .into());
    }
    sku::restock(&mut tx, sku_id, adj.delta, row.limit_per_user).await?;
    let movement = NewMovement {
        sku_id,
        kind: MovementKind::Adjustment,
        delta: adj.delta,
        total_before: row.total_stock,
        available_before: row.available_stock,
        reason: Some(adj.reason),
        reference: adj.reference,
        actor: adj.actor,
        adjustment_id: adj.adjustment_id,
        created_at_ms: crate::clock::unix_ms(),
        redis_available: None,
        redis_op: Some(op),
        redis_pending: adj.delta > 0,
    };
    let id = movements::insert(&mut tx, &movement).await?;
    let mut out = db.outgoing();
    movements::note(&mut out, &movement, id, row.low_stock_threshold);
    event_outbox::stage(&mut tx, out, movement.created_at_ms).await?;
    let totals = Totals {
        delta: adj.delta,
        available_mysql: row.available_stock + adj.delta,
        limit_per_user: row.limit_per_user,
        total,
    };
    if adj.delta < 0 {
        let limit = u64::from(row.limit_per_user);
        let layout = layout_for(redis, sku_id, row.buckets, limit).await?;
        sku_admin::take_cut(redis, &layout, totals, op).await?;
        sku_admin::commit_cut(db, redis, sku_id, tx, op, id).await?;
    } else {
        tx.commit().await.map_err(DbError::from)?;
        let step = PendingStep {
            movement_id: id,
            sku_id,
            create: false,
            delta: adj.delta,
            available_after: totals.available_mysql,
            total_after: total,
            redis_op: op.to_string(),
        };
        restock_redis(db, redis, &step, row.limit_per_user).await?;
    }
    let recorded = movement.recorded(id);
    tracing::info!(sku.id = %sku_id, delta = adj.delta, movement.id = recorded.id,
        actor = adj.actor, "admin.adjustment: applied in MySQL and Redis");
    Ok(Adjusted::Applied(recorded))
}

/// The Redis step of a committed restock; `NotLoaded` when Redis lost the
/// SKU meanwhile (warm-up will count the movement).
async fn restock_redis(
    db: &Db,
    redis: &RedisStore,
    step: &PendingStep,
    limit_per_user: u32,
) -> Result<(), AdjustError> {
    let layout = redis.buckets().read_layout(step.sku_id).await?;
    match stock_step::apply_restock(db, redis, &layout, step, limit_per_user).await? {
        Applied::Done => Ok(()),
        Applied::NotLoaded => Err(SkuAdminError::NotLoaded(step.sku_id.get()).into()),
    }
}

/// The answer to an `adjustment_id` seen before: its movement when the body
/// is the same (its Redis step finished first if a failure left it
/// pending), a mismatch otherwise.
async fn replay(
    db: &Db,
    redis: &RedisStore,
    seen: Movement,
    adj: &Adjustment<'_>,
    limit_per_user: u32,
) -> Result<Adjusted, AdjustError> {
    let same = seen.delta == adj.delta
        && seen.reason.as_deref() == Some(adj.reason)
        && seen.reference.as_deref() == adj.reference;
    if !same {
        return Err(AdjustError::Mismatch(
            seen.adjustment_id.clone().unwrap_or_default(),
        ));
    }
    let mut conn = db.conn().await?;
    if let Some(step) = movement_steps::pending_of(&mut conn, seen.id).await? {
        drop(conn);
        restock_redis(db, redis, &step, limit_per_user).await?;
    }
    Ok(Adjusted::Replayed(seen))
}
