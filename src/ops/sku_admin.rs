//! Creating and restocking a SKU: MySQL decides under the SKU row lock, and
//! Redis moves by a delta so live reservations are never clobbered. A new
//! total above the old one (and a creation) commits first and reaches Redis
//! after, keyed by its movement's step; a lower one is taken from Redis
//! before the commit and given back if the commit fails, so Redis is never
//! ahead of MySQL ([`super::stock_step`]). If Redis refuses a cut (it
//! already promised the units) the transaction rolls back: both stores keep
//! their old values. A SKU that exists but Redis does not hold is refused
//! (`NotLoaded`, 503) until warm-up loaded it with its buyer state.
//!
//! The bucket count (`redis/buckets`) is set here too: at creation, or later
//! by a re-split, which is refused while any buyer state of the SKU lives in
//! Redis (records within retention, outbox entries, transfers).
//!
//! Every change of the total is a `stock_movements` row (`create`, `restock`)
//! written in the same transaction; an unchanged total writes none.
//!
//! The sale terms (window, `requires_pass`; docs/contract.md §19) are
//! decided under the same row lock (an opened sale's opening
//! cannot move: `SaleOpen`, nothing written), committed with the stock, and
//! mirrored onto every hash of the SKU's layout before its stock reaches
//! Redis, so a new SKU never sells outside its window.

use crate::db::movement_steps::PendingStep;
use crate::db::movements::{self, MovementKind, NewMovement};
use crate::db::{event_outbox, ledger, sale, sku, Db, DbError, Transaction};
use crate::domain::{OpenedSale, SaleTerms, SkuId, TermsChange};
use crate::ops::sku_admin_error::SkuAdminError;
use crate::ops::sku_layout::layout_for;
use crate::ops::stock_step::{self, Applied};
use crate::redis::buckets::Layout;
use crate::redis::{LoadMode, LoadOutcome, RedisStore, Step};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuState {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub available_mysql: i64,
    pub limit_per_user: u32,
    pub buckets: u16,
    pub low_stock_threshold: Option<u32>,
    /// The sale terms after the change.
    pub terms: SaleTerms,
    /// Whether the change moved the terms (the api nodes' boards are told).
    pub terms_changed: bool,
}

/// What a `PUT` may set beside the total and the limit; `None` keeps the
/// SKU's current value (a new SKU: 1 bucket, no threshold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkuOptions {
    /// Redis buckets the SKU is split into.
    pub buckets: Option<u16>,
    /// `stockd.sku.low_stock` at or below this many units; `Some(0)` clears it.
    pub low_stock_threshold: Option<u32>,
    /// The sale window and `requires_pass`; absent parts keep the SKU's.
    pub terms: TermsChange,
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
        terms: options.terms,
    };
    let op = stock_step::new_op();
    tokio::time::timeout(
        db.operation_bound(),
        upsert_unbounded(db, redis, sku_id, wanted, actor, &op),
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
    terms: TermsChange,
}

async fn upsert_unbounded(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    wanted: Wanted,
    actor: &str,
    op: &str,
) -> Result<SkuState, SkuAdminError> {
    let Wanted {
        total,
        limit_per_user,
        buckets,
        low_stock_threshold,
        terms: terms_change,
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
            if redis.skus().sku(sku_id).await?.is_none() {
                return Err(SkuAdminError::NotLoaded(sku_id.get()));
            }
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
    let terms_before = match kind {
        MovementKind::Create => SaleTerms::default(),
        _ => sale::terms(&mut tx, sku_id).await?.unwrap_or_default(),
    };
    let terms = terms_before
        .changed(&terms_change, crate::clock::unix_ms() as i64)
        .map_err(sale_open)?;
    let terms_changed = terms != terms_before;
    if terms_changed {
        sale::set_terms(&mut tx, sku_id, &terms).await?;
    }
    let delta = total - before.0;
    if kind == MovementKind::Restock {
        sku::restock(&mut tx, sku_id, delta, limit_per_user).await?;
    }
    let available_mysql = before.1 + delta;
    let wanted = buckets.unwrap_or(stored_buckets);
    let layout = layout_for(redis, sku_id, wanted, u64::from(limit_per_user)).await?;
    if wanted != stored_buckets {
        sku::set_buckets(&mut tx, sku_id, wanted).await?;
    }
    if let Some(threshold) = low_stock_threshold {
        low_threshold = (threshold > 0).then_some(threshold);
        sku::set_low_stock_threshold(&mut tx, sku_id, low_threshold).await?;
    }
    // A creation and a restock reach Redis after their commit.
    let after_commit = kind == MovementKind::Create || delta > 0;
    let mut movement_id = None;
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
            redis_op: Some(op),
            redis_pending: after_commit,
        };
        let id = movements::insert(&mut tx, &movement).await?;
        let mut out = db.outgoing();
        movements::note(&mut out, &movement, id, low_threshold);
        event_outbox::stage(&mut tx, out, movement.created_at_ms).await?;
        movement_id = Some(id);
    }
    let totals = Totals {
        delta,
        available_mysql,
        limit_per_user,
        total,
    };
    match movement_id.filter(|_| after_commit) {
        Some(id) => {
            tx.commit().await.map_err(DbError::from)?;
            redis.skus().set_sale_terms(&layout, &terms).await?;
            let step = PendingStep {
                movement_id: id,
                sku_id,
                create: kind == MovementKind::Create,
                delta,
                available_after: available_mysql,
                total_after: total,
                redis_op: op.to_string(),
            };
            let applied =
                stock_step::apply_restock(db, redis, &layout, &step, limit_per_user).await?;
            if applied == Applied::NotLoaded {
                return Err(SkuAdminError::NotLoaded(sku_id.get()));
            }
        }
        None => {
            take_cut(redis, &layout, totals, op).await?;
            commit_cut(db, redis, sku_id, tx, op, movement_id.unwrap_or(0)).await?;
            redis.skus().set_sale_terms(&layout, &terms).await?;
        }
    }
    if terms_changed {
        if let Err(err) = redis.skus().tell_sale_terms(sku_id).await {
            tracing::warn!(sku.id = %sku_id, error = %err,
                "admin.sku: the sale terms changed; the boards' re-read will see it");
        }
    }
    Ok(SkuState {
        sku_id,
        total_stock: total,
        available_mysql,
        limit_per_user,
        buckets: wanted,
        low_stock_threshold: low_threshold,
        terms,
        terms_changed,
    })
}

/// The words of a refused change of an opened sale (409 `SALE_OPEN`).
fn sale_open(why: OpenedSale) -> SkuAdminError {
    let (opened_at_ms, what) = match why {
        OpenedSale::WindowRemoved { opened_at_ms } => {
            (opened_at_ms, "its window cannot be removed")
        }
        OpenedSale::OpeningMoved { opened_at_ms } => {
            (opened_at_ms, "its opens_at cannot move (closes_at may)")
        }
    };
    let at = crate::clock::rfc3339_ms(opened_at_ms as u64);
    SkuAdminError::SaleOpen(format!("the sale opened at {at}: {what}"))
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

/// Takes a cut (or a change of no units: limit, total) from Redis before
/// the commit, recorded under step `op` until settled (`load_sku.lua`);
/// refused, with nothing written, when the cut would take Redis below what
/// it already promised, or when Redis does not hold the SKU.
pub(crate) async fn take_cut(
    redis: &RedisStore,
    layout: &Layout,
    totals: Totals,
    op: &str,
) -> Result<(), SkuAdminError> {
    let Totals {
        delta,
        available_mysql,
        limit_per_user,
        total,
    } = totals;
    let step = Step {
        op,
        mode: LoadMode::Move,
        movement_id: 0,
        record_cut: delta < 0,
    };
    let loaded = redis
        .skus()
        .load_sku(
            layout,
            delta,
            available_mysql,
            u64::from(limit_per_user),
            total as u64,
            step,
        )
        .await?;
    match loaded {
        LoadOutcome::Loaded { .. } | LoadOutcome::Included => Ok(()),
        LoadOutcome::BelowReserved { available } => Err(SkuAdminError::BelowReserved {
            requested: total,
            reserved: total - available_mysql + (available_mysql - available),
        }),
        LoadOutcome::Layout => Err(SkuAdminError::BucketsLocked(
            "the bucket count changed in Redis meanwhile; retry".into(),
        )),
        LoadOutcome::NotLoaded => Err(SkuAdminError::NotLoaded(layout.sku().get())),
    }
}

/// Commits a transaction whose cut Redis took (step `op`, movement
/// `movement_id`): kept when the commit succeeded; settled under the row lock when it failed, since a
/// failed commit may still have committed ([`stock_step::settle_cut`]).
/// What cannot be settled now the sweep settles.
pub(crate) async fn commit_cut(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    tx: Transaction<'_>,
    op: &str,
    movement_id: u64,
) -> Result<(), SkuAdminError> {
    match tx.commit().await {
        Ok(()) => {
            let kept = Some(movement_id);
            if let Err(err) = redis.skus().settle_cut(sku_id, op, kept).await {
                tracing::warn!(sku.id = %sku_id, step.id = op, error = %err,
                    "admin.stock: the cut committed; the sweep settles its Redis record");
            }
            Ok(())
        }
        Err(err) => {
            if let Err(settle) = stock_step::settle_cut(db, redis.skus(), sku_id, op).await {
                tracing::warn!(sku.id = %sku_id, step.id = op, error = %settle,
                    "admin.stock: the cut's commit failed; the sweep settles it");
            }
            Err(DbError::from(err).into())
        }
    }
}
