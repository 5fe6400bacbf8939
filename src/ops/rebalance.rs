//! The reconciler's care of split SKUs (`redis/buckets`), once per pass:
//! - finishes transfers abandoned between debit and credit (a process died):
//!   credit (a no-op when it was done) then settle;
//! - puts stock back within reach: a bucket drained while the pool holds
//!   stock (a restock, a repair, a reclaim) is undrained; when the pool is
//!   empty while a bucket is drained and others still hold stock (releases
//!   that came back after the sell-out, or leftovers of buckets no buyer
//!   routes to any more), everything they hold goes back to the pool and the
//!   drained buckets lease again.
//!
//! So no unit stays stranded longer than one reconcile interval after the
//! sale's traffic stops reaching it; while traffic flows, a dry bucket's own
//! refill reclaims in-line (`redis/buckets/refill.rs`).

use crate::domain::SkuId;
use crate::redis::buckets::transfer::{Credited, CREDIT_HORIZON_SECS};
use crate::redis::buckets::{Holder, Layout};
use crate::redis::{RedisError, RedisStore};

/// A pending transfer older than this is taken as abandoned.
const ABANDONED_AFTER_SECS: u64 = 10;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rebalanced {
    /// Abandoned transfers finished.
    pub finished: usize,
    /// Buckets undrained.
    pub undrained: usize,
    /// Units moved back to the pool.
    pub reclaimed: i64,
}

/// One pass over split SKU `sku`: finishes its abandoned transfers, then puts
/// its stock back within reach (module doc). An unsplit SKU is left alone.
pub async fn rebalance(
    redis: &RedisStore,
    sku: SkuId,
    now_secs: u64,
) -> Result<Rebalanced, RedisError> {
    let layout = redis.buckets().layout(sku).await?;
    let mut done = Rebalanced::default();
    if !layout.is_split() {
        return Ok(done);
    }
    done.finished = finish_abandoned(redis, &layout, now_secs).await?;
    let Some(reached) = put_within_reach(redis, &layout).await? else {
        return Ok(done);
    };
    done.undrained = reached.undrained;
    done.reclaimed = reached.reclaimed;
    if done != Rebalanced::default() {
        tracing::info!(sku.id = %sku, finished = done.finished, undrained = done.undrained,
            reclaimed = done.reclaimed, "rebalance: split SKU's stock put back within reach");
    }
    Ok(done)
}

/// Credits (a no-op when done) then settles every transfer pending longer than
/// [`ABANDONED_AFTER_SECS`]; returns how many were finished.
async fn finish_abandoned(
    redis: &RedisStore,
    layout: &Layout,
    now_secs: u64,
) -> Result<usize, RedisError> {
    let sku = layout.sku();
    let mut finished = 0;
    for bucket in layout.buckets() {
        for pending in redis.buckets().pending_transfers(layout, bucket).await? {
            let age = now_secs.saturating_sub(pending.at_secs);
            if age < ABANDONED_AFTER_SECS {
                continue;
            }
            if age > CREDIT_HORIZON_SECS {
                // Its credit id may be forgotten: crediting could count it twice.
                tracing::error!(sku.id = %sku, transfer = %pending.id, age_secs = age,
                    "rebalance: transfer pending for days; not finished automatically (docs/operations.md)");
                continue;
            }
            match redis
                .buckets()
                .credit(layout, pending.dest, &pending.id, pending.units)
                .await?
            {
                Credited::Applied | Credited::Already => {
                    redis
                        .buckets()
                        .settle(layout, Holder::Bucket(bucket), &pending.id)
                        .await?;
                    finished += 1;
                }
                Credited::Missing => {
                    tracing::warn!(sku.id = %sku, transfer = %pending.id, "rebalance: destination bucket missing; transfer left pending");
                }
            }
        }
    }
    Ok(finished)
}

/// Undrains the drained buckets, after reclaiming every bucket's stock to the
/// pool when the pool is empty and some bucket still holds stock. `None` when
/// there is nothing to do (no drained bucket, a transfer in flight, or nothing
/// stranded); `finished` of the answer is 0.
async fn put_within_reach(
    redis: &RedisStore,
    layout: &Layout,
) -> Result<Option<Rebalanced>, RedisError> {
    let Some(stock) = redis.buckets().split_stock(layout).await? else {
        return Ok(None);
    };
    if stock.in_transfer {
        return Ok(None);
    }
    let drained: Vec<u16> = stock
        .buckets
        .iter()
        .filter(|b| b.drained)
        .map(|b| b.bucket)
        .collect();
    if drained.is_empty() {
        return Ok(None);
    }
    let mut reached = Rebalanced::default();
    if stock.pool <= 0 {
        let stranded = stock.buckets.iter().any(|b| b.available > 0);
        if !stranded {
            return Ok(None);
        }
        reached.reclaimed = redis.buckets().reclaim(layout, None).await?;
    }
    for bucket in drained {
        redis.buckets().set_drained(layout, bucket, false).await?;
        reached.undrained += 1;
    }
    Ok(Some(reached))
}
