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

use super::buckets::{Holder, Layout, Take, Transferred};
use super::sku::{LoadOutcome, Skus, Step};
use super::RedisError;

/// Reclaim-and-cut rounds before the cut is refused: each reclaims what the
/// pool lacked at the last try; more than one because the buckets of a busy
/// SKU lease from the pool between a reclaim and the cut.
const CUT_ROUNDS: usize = 4;

/// A split SKU's cut, its arguments as [`Skus::load_sku`] takes them.
pub(super) struct SplitCut<'a> {
    pub layout: &'a Layout,
    /// Negative: the units cut.
    pub delta: i64,
    pub available_if_absent: i64,
    pub limit_per_user: u64,
    pub total: u64,
    pub step: Step<'a>,
}

impl Skus {
    /// Cuts a split SKU: decided on what the pool and the buckets hold,
    /// taken from the pool with only its shortfall reclaimed, what was
    /// reclaimed given back when refused. See the module doc.
    pub(super) async fn cut_split(&self, cut: SplitCut<'_>) -> Result<LoadOutcome, RedisError> {
        let wanted = -cut.delta;
        let Some(before) = self.buckets.split_stock(cut.layout).await? else {
            return self.cut_pool(&cut).await; // not loaded: the script answers
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
            let pool = match self.cut_pool(&cut).await? {
                LoadOutcome::BelowReserved { available } => available,
                done => return Ok(done),
            };
            if self
                .reclaim_short(cut.layout, wanted - pool, &mut reclaimed)
                .await?
                == 0
            {
                break;
            }
        }
        self.give_back(cut.layout, &reclaimed).await?;
        let available = self.sku(cut.layout.sku()).await?.map_or(0, |s| s.available);
        Ok(LoadOutcome::BelowReserved { available })
    }

    async fn cut_pool(&self, cut: &SplitCut<'_>) -> Result<LoadOutcome, RedisError> {
        self.load_home(
            cut.layout,
            cut.delta,
            cut.available_if_absent,
            cut.limit_per_user,
            cut.total,
            cut.step,
        )
        .await
    }

    /// Moves up to `short` units from the buckets to the pool, bucket by
    /// bucket, noting what each gave in `reclaimed`; returns the units moved.
    async fn reclaim_short(
        &self,
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
            if let Transferred::Moved(units) = self
                .buckets
                .transfer(layout, from, Holder::Pool, take)
                .await?
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
    async fn give_back(&self, layout: &Layout, reclaimed: &[(u16, i64)]) -> Result<(), RedisError> {
        for &(bucket, units) in reclaimed {
            let take = Take {
                min: 1,
                max: units,
                divisor: 1,
            };
            let to = Holder::Bucket(bucket);
            self.buckets
                .transfer(layout, Holder::Pool, to, take)
                .await?;
        }
        Ok(())
    }
}
