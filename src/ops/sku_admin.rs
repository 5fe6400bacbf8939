//! Creating and restocking a SKU: MySQL first (under the SKU row lock), then
//! Redis by a delta so live reservations are never clobbered. If Redis refuses
//! (the new total would drop below what Redis already promised) the MySQL
//! transaction rolls back: both stores keep their old values.
//!
//! The bucket count (`redis/buckets`) is set here too: at creation, or later
//! by a re-split, which is refused while any buyer state of the SKU lives in
//! Redis (records within retention, outbox entries, transfers).
//!
//! Every change of the total is a `stock_movements` row (`create`, `restock`)
//! written in the same transaction; an unchanged total writes none.

use crate::db::movements::{self, MovementKind, NewMovement};
use crate::db::{event_outbox, ledger, sku, Db, DbError};
use crate::domain::SkuId;
use crate::redis::buckets::Layout;
use crate::redis::{LoadOutcome, RedisError, RedisStore};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuState {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub available_mysql: i64,
    pub limit_per_user: u32,
    pub buckets: u16,
    pub low_stock_threshold: Option<u32>,
}

/// What a `PUT` may set beside the total and the limit; `None` keeps the
/// SKU's current value (a new SKU: 1 bucket, no threshold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkuOptions {
    /// Redis buckets the SKU is split into.
    pub buckets: Option<u16>,
    /// `stockd.sku.low_stock` at or below this many units; `Some(0)` clears it.
    pub low_stock_threshold: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum SkuAdminError {
    #[error("total_stock {requested} is below the {reserved} units already reserved")]
    BelowReserved { requested: i64, reserved: i64 },
    #[error("the bucket count cannot change while buyer state lives in Redis: {0}")]
    BucketsLocked(String),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
}

/// Creates the SKU or sets its new total and limit (and, when given, its
/// bucket count), in MySQL and Redis. `actor` names who asked, for the
/// movement row.
pub async fn upsert(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    total: i64,
    limit_per_user: u32,
    options: SkuOptions,
    actor: &str,
) -> Result<SkuState, SkuAdminError> {
    let wanted = Wanted {
        total,
        limit_per_user,
        buckets: options.buckets,
        low_stock_threshold: options.low_stock_threshold,
    };
    tokio::time::timeout(
        db.operation_bound(),
        upsert_unbounded(db, redis, sku_id, wanted, actor),
    )
    .await
    .map_err(|_| SkuAdminError::Db(DbError::QueryTimeout))?
}

/// What a `PUT` asks the SKU to be.
struct Wanted {
    total: i64,
    limit_per_user: u32,
    buckets: Option<u16>,
    low_stock_threshold: Option<u32>,
}

async fn upsert_unbounded(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    wanted: Wanted,
    actor: &str,
) -> Result<SkuState, SkuAdminError> {
    let Wanted {
        total,
        limit_per_user,
        buckets,
        low_stock_threshold,
    } = wanted;
    let mut conn = db.conn().await?;
    let mut tx = conn
        .start_transaction(ledger::tx_opts())
        .await
        .map_err(DbError::from)?;
    let mut low_threshold = None;
    let (kind, before, stored_buckets) = match sku::lock(&mut tx, sku_id).await? {
        None => {
            let n = buckets.unwrap_or(1);
            sku::insert(&mut tx, sku_id, total, limit_per_user, n).await?;
            (MovementKind::Create, (0, 0), n)
        }
        Some(row) => {
            if total < row.reserved() {
                return Err(SkuAdminError::BelowReserved {
                    requested: total,
                    reserved: row.reserved(),
                });
            }
            let before = (row.total_stock, row.available_stock);
            low_threshold = row.low_stock_threshold;
            (MovementKind::Restock, before, row.buckets)
        }
    };
    let delta = total - before.0;
    if kind == MovementKind::Restock {
        sku::restock(&mut tx, sku_id, delta, limit_per_user).await?;
    }
    let available_mysql = before.1 + delta;
    let wanted = buckets.unwrap_or(stored_buckets);
    let layout = layout_for(redis, sku_id, wanted, u64::from(limit_per_user)).await?;
    let totals = Totals {
        delta,
        available_mysql,
        limit_per_user,
        total,
    };
    load_delta(redis, &layout, totals).await?;
    if wanted != stored_buckets {
        sku::set_buckets(&mut tx, sku_id, wanted).await?;
    }
    if let Some(threshold) = low_stock_threshold {
        low_threshold = (threshold > 0).then_some(threshold);
        sku::set_low_stock_threshold(&mut tx, sku_id, low_threshold).await?;
    }
    if delta != 0 || kind == MovementKind::Create {
        let movement = NewMovement {
            sku_id,
            kind,
            delta,
            total_before: before.0,
            available_before: before.1,
            reason: None,
            reference: None,
            actor,
            adjustment_id: None,
            created_at_ms: crate::clock::unix_ms(),
            redis_available: None,
        };
        let id = movements::insert(&mut tx, &movement).await?;
        let mut out = db.outgoing();
        movements::note(&mut out, &movement, id, low_threshold);
        event_outbox::stage(&mut tx, out, movement.created_at_ms).await?;
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(SkuState {
        sku_id,
        total_stock: total,
        available_mysql,
        limit_per_user,
        buckets: wanted,
        low_stock_threshold: low_threshold,
    })
}

/// A change of a SKU's stock, as MySQL has it after the change.
pub(crate) struct Totals {
    /// Units added to (or, negative, removed from) total and available.
    pub delta: i64,
    /// MySQL's available after the change (what Redis starts from when it
    /// does not hold the SKU yet).
    pub available_mysql: i64,
    pub limit_per_user: u32,
    /// The total after the change.
    pub total: i64,
}

/// Moves the SKU's stock in Redis by `totals.delta` without touching live
/// reservations (`load_sku.lua`); refused, with nothing written, when the cut
/// would take Redis below what it already promised.
pub(crate) async fn load_delta(
    redis: &RedisStore,
    layout: &Layout,
    totals: Totals,
) -> Result<(), SkuAdminError> {
    let Totals {
        delta,
        available_mysql,
        limit_per_user,
        total,
    } = totals;
    let loaded = redis
        .skus()
        .load_sku(
            layout,
            delta,
            available_mysql,
            u64::from(limit_per_user),
            total as u64,
        )
        .await?;
    match loaded {
        LoadOutcome::Loaded { .. } => Ok(()),
        LoadOutcome::BelowReserved { available } => Err(SkuAdminError::BelowReserved {
            requested: total,
            reserved: total - available_mysql + (available_mysql - available),
        }),
        LoadOutcome::Layout => Err(SkuAdminError::BucketsLocked(
            "the bucket count changed in Redis meanwhile; retry".into(),
        )),
    }
}

/// The layout the SKU is to have: its current one when the count stays, a
/// fresh one for a SKU not loaded yet, or a re-split when nothing of its
/// buyers lives in Redis.
pub(crate) async fn layout_for(
    redis: &RedisStore,
    sku_id: SkuId,
    wanted: u16,
    limit_per_user: u64,
) -> Result<Layout, SkuAdminError> {
    let current = redis.buckets().read_layout(sku_id).await?;
    if current.n() == wanted {
        return Ok((*current).clone());
    }
    let fresh = redis.buckets().choose_layout(sku_id, wanted).await?;
    if redis.skus().sku(sku_id).await?.is_none() {
        return Ok(fresh);
    }
    if let Some(reason) = redis.buckets().buyer_state(&current).await? {
        return Err(SkuAdminError::BucketsLocked(reason));
    }
    redis
        .buckets()
        .resplit(&current, &fresh, limit_per_user)
        .await?;
    Ok(fresh)
}
