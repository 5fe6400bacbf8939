//! The Redis half of a decision (`finish.lua`, idempotent): written only
//! after MySQL committed, so a mirror is the proof of a decision (see
//! `recovered`). The row carries `redis_pending = 1` until the mirror
//! succeeded, and the closer's sweep retries pending mirrors, so a Redis
//! outage delays a mirror but never loses it.

use crate::clock::unix_ms;
use crate::db::ledger::{self, settle, LedgerRow};
use crate::db::Db;
use crate::domain::{ReservationStatus, SkuId};
use crate::redis::{FinishEffect, FinishOutcome, RedisStore};

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
pub(super) async fn mirror_then_clear_later(db: &Db, redis: &RedisStore, row: &LedgerRow) {
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
pub(super) fn finish_effect(row: &LedgerRow) -> FinishEffect {
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
    if let Err(err) = crate::ops::rebalance::rebalance(redis, sku_id, now_secs).await {
        tracing::warn!(sku.id = %sku_id, error = %err, "lifecycle.mirror: rebalance after a release failed; the reconciler retries");
    }
}
