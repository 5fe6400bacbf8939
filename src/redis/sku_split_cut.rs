//! A cut of a split SKU (issue 51 item 4). Only the pool, in the home slot,
//! can be cut atomically (`load_sku.lua`); the buckets' stock lives in other
//! slots and comes back to the pool by transfers. Reclaiming every bucket
//! first and then letting Redis decide left, on a refusal, drained buckets
//! answering `SOLD_OUT` while their units sat in the pool until a reconcile
//! pass, and on a busy SKU the buckets leased the reclaimed units back
//! before the cut ran, so it was refused although the units were there.
//!
//! So a cut decides before it reclaims: fewer units in the pool and the
//! buckets together than the cut asks is refused with nothing moved. Then
//! it tries the pool alone, and reclaims from the buckets only what the pool
//! lacks, a few rounds at most; refused in the end, it gives each bucket
//! back what it took from it (as much as the pool still has).

use std::future::Future;

use super::buckets::{Buckets, Holder, Layout, Take, Transferred};
use super::sku_step::LoadOutcome;
use super::RedisError;

/// Reclaim-and-cut rounds before the cut is refused: each reclaims what the
/// pool lacked at the last try; more than one because the buckets of a busy
/// SKU lease from the pool between a reclaim and the cut.
const CUT_ROUNDS: usize = 4;

/// Cuts `-delta` units of the split SKU of `layout`: decided on what the
/// pool and the buckets hold, taken from the pool (`cut_pool`: the SKU's
/// load on its home hash, `Skus::load_sku`) with only its shortfall
/// reclaimed, what was reclaimed given back when refused (then
/// `available`, the SKU's units, is the answer's). See the module doc.
pub(super) async fn cut_split<P, PF, A, AF>(
    buckets: &Buckets,
    layout: &Layout,
    delta: i64,
    cut_pool: P,
    available: A,
) -> Result<LoadOutcome, RedisError>
where
    P: Fn() -> PF,
    PF: Future<Output = Result<LoadOutcome, RedisError>>,
    A: FnOnce() -> AF,
    AF: Future<Output = Result<i64, RedisError>>,
{
    let wanted = -delta;
    let Some(before) = buckets.split_stock(layout).await? else {
        return cut_pool().await; // not loaded: the script answers
    };
    let held = before.pool.max(0)
        + before
            .buckets
            .iter()
            .map(|b| b.available.max(0))
            .sum::<i64>();
    // Units on the move between slots count nowhere in this reading:
    // then the rounds below decide.
    if held < wanted && !before.in_transfer {
        return Ok(LoadOutcome::BelowReserved { available: held });
    }
    let mut reclaimed: Vec<(u16, i64)> = Vec::new();
    for _ in 0..CUT_ROUNDS {
        let pool = match cut_pool().await? {
            LoadOutcome::BelowReserved { available } => available,
            done => return Ok(done),
        };
        if reclaim_short(buckets, layout, wanted - pool, &mut reclaimed).await? == 0 {
            break;
        }
    }
    give_back(buckets, layout, &reclaimed).await?;
    Ok(LoadOutcome::BelowReserved {
        available: available().await?,
    })
}

/// Moves up to `short` units from the buckets to the pool, bucket by
/// bucket, noting what each gave in `reclaimed`; returns the units moved.
async fn reclaim_short(
    buckets: &Buckets,
    layout: &Layout,
    mut short: i64,
    reclaimed: &mut Vec<(u16, i64)>,
) -> Result<i64, RedisError> {
    let mut moved = 0;
    for bucket in layout.buckets() {
        if short <= 0 {
            break;
        }
        let take = Take {
            min: 1,
            max: short,
            divisor: 1,
        };
        let from = Holder::Bucket(bucket);
        if let Transferred::Moved(units) =
            buckets.transfer(layout, from, Holder::Pool, take).await?
        {
            reclaimed.push((bucket, units));
            short -= units;
            moved += units;
        }
    }
    Ok(moved)
}

/// Gives each bucket back what a refused cut reclaimed from it, as much
/// as the pool holds (what the pool no longer has, a bucket leased).
async fn give_back(
    buckets: &Buckets,
    layout: &Layout,
    reclaimed: &[(u16, i64)],
) -> Result<(), RedisError> {
    for &(bucket, units) in reclaimed {
        let take = Take {
            min: 1,
            max: units,
            divisor: 1,
        };
        let to = Holder::Bucket(bucket);
        buckets.transfer(layout, Holder::Pool, to, take).await?;
    }
    Ok(())
}
