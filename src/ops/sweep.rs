//! The closer's backstop pass (contract §5): releases `RESERVED` rows past their
//! expiry that the delay queue never delivered, and retries Redis mirrors
//! still pending after a Redis outage.
//!
//! One call is one bounded step, the sweep's counterpart of the consumer's
//! batch: at most [`SKUS_MAX`] SKUs with one batch of rows each (one
//! transaction per SKU, [`super::lifecycle::release_expired`], mirrored to
//! Redis in one call per bucket, `lifecycle::mirror_many`), then one batch
//! of pending mirrors. Whether to go again at once (a full batch) or after the
//! sweep interval is the closer's loop's call, so a test drives one step.
//!
//! Before a SKU's batch is released, the rows about to expire are checked
//! against their Redis mirrors: one that Redis shows CONFIRMED had its confirm
//! lost by MySQL (a failover) and is confirmed again instead of released
//! ([`super::lifecycle`]'s module doc). A confirm Redis learns of after this
//! check was committed in MySQL first, so the release cannot take it.

use crate::clock::unix_ms;
use crate::db::holds::{self, Search};
use crate::db::ledger;
use crate::db::Db;
use crate::domain::{is_due, RequestId, Requester, ReservationStatus, SkuId};
use crate::redis::RedisStore;

use super::lifecycle::{
    mirror_many, release_expired, transition, LifecycleError, OrderHold, OrderTransitionOutcome,
    SingleHold, Transition,
};

/// SKUs examined per pass: bounds one step's work and the SKU list it reads.
pub const SKUS_MAX: usize = 100;
/// A pending mirror younger than this is still being done by its own request.
const PENDING_MIRROR_AGE_MS: u64 = 2000;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Rows released, over every SKU examined.
    pub released: usize,
    /// Pending mirrors retried.
    pub mirrors_retried: usize,
    /// Expired rows whose Redis mirror proved a confirm MySQL lost: confirmed
    /// again instead of released.
    pub confirms_reapplied: usize,
    /// A SKU's batch or the mirror batch was full: more is likely waiting, so
    /// the loop goes again without sleeping.
    pub full: bool,
}

/// One pass: per SKU with `RESERVED` rows expired before `cutoff_ms`, release
/// up to `batch` of them and mirror each to Redis; then retry up to `batch`
/// pending mirrors. A mirror that fails stays pending for the next pass.
pub async fn pass(
    db: &Db,
    redis: &RedisStore,
    cutoff_ms: u64,
    batch: usize,
) -> Result<Swept, LifecycleError> {
    let skus = db
        .bounded(async {
            let mut conn = db.conn().await?;
            holds::skus_with_expired(&mut conn, cutoff_ms, SKUS_MAX).await
        })
        .await?;
    let mut swept = Swept::default();
    for raw in skus {
        let Ok(sku_id) = SkuId::new(raw) else {
            continue;
        };
        swept.confirms_reapplied +=
            reapply_lost_confirms(db, redis, sku_id, cutoff_ms, batch).await?;
        let released = db
            .bounded(release_expired(db, sku_id, cutoff_ms, batch))
            .await?;
        swept.released += released.len();
        swept.full |= released.len() >= batch;
        mirror_many(db, redis, &released).await;
    }
    let (released, full) = release_expired_orders(db, redis, cutoff_ms, batch).await?;
    swept.released += released;
    swept.full |= full;
    let older_than = unix_ms().saturating_sub(PENDING_MIRROR_AGE_MS);
    let pending = db
        .bounded(async {
            let mut conn = db.conn().await?;
            ledger::pending_mirrors(&mut conn, older_than, batch).await
        })
        .await?;
    mirror_many(db, redis, &pending).await;
    swept.mirrors_retried = pending.len();
    swept.full |= pending.len() >= batch;
    Ok(swept)
}

/// Up to `batch` orders expired before `cutoff_ms`, each released whole
/// (`lifecycle::transition` of an `OrderHold`; its lines are left out of the per-SKU
/// release). Returns how many were released and whether the batch was full.
async fn release_expired_orders(
    db: &Db,
    redis: &RedisStore,
    cutoff_ms: u64,
    batch: usize,
) -> Result<(usize, bool), LifecycleError> {
    let ids = db
        .bounded(async {
            let mut conn = db.conn().await?;
            holds::expired_ids(&mut conn, Search::Orders, cutoff_ms, batch).await
        })
        .await?;
    let mut released = 0;
    for raw in &ids {
        let Ok(order_id) = RequestId::parse(raw) else {
            continue; // every stored id went through the parser on its way in
        };
        let hold = OrderHold {
            order_id: &order_id,
        };
        let (expire, anyone) = (Transition::Expire, &Requester::Anyone);
        let outcome = transition(db, redis, &hold, expire, unix_ms(), anyone).await?;
        if let OrderTransitionOutcome::Done { changed: true, .. } = outcome {
            released += 1;
        }
    }
    Ok((released, ids.len() >= batch))
}

/// Of one SKU's rows due for release, confirms those whose Redis mirror says
/// CONFIRMED (the transition re-applies the lost confirm; returns how many),
/// and extends again those whose mirror holds a later time to pay.
/// A Redis error skips the check for this pass and the release waits with it:
/// releasing unchecked could free a paid unit.
async fn reapply_lost_confirms(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    cutoff_ms: u64,
    batch: usize,
) -> Result<usize, LifecycleError> {
    let ids = db
        .bounded(async {
            let mut conn = db.conn().await?;
            let singles = Search::Singles(sku_id);
            holds::expired_ids(&mut conn, singles, cutoff_ms, batch).await
        })
        .await?;
    let mut reapplied = 0;
    for raw in ids {
        let Ok(request_id) = RequestId::parse(&raw) else {
            continue; // every stored id went through the parser on its way in
        };
        let record = redis
            .reservations()
            .reservation(sku_id, &request_id)
            .await?;
        let Some(record) = record else { continue };
        let confirmed = record.status == ReservationStatus::Confirmed;
        // Still reserved in Redis, extended, with a time not yet due: an
        // extension MySQL may have lost; the expiry re-applies it if so
        // (`lifecycle::recovered`). The count is read only in that case.
        let extended = record.status == ReservationStatus::Reserved
            && !is_due(record.expires_at_ms, cutoff_ms)
            && redis
                .reservations()
                .mirrored_extensions(sku_id, &request_id, record.user_id)
                .await?
                > 0;
        if confirmed || extended {
            let hold = SingleHold {
                sku_id,
                request_id: &request_id,
            };
            let (expire, anyone) = (Transition::Expire, &Requester::Anyone);
            transition(db, redis, &hold, expire, unix_ms(), anyone).await?;
            reapplied += usize::from(confirmed);
        }
    }
    Ok(reapplied)
}
