//! Drift between Redis and MySQL, Redis side: the reconciler's snapshot of
//! a SKU, the compare-and-set repair, and the writes from MySQL (warm-up,
//! `rebuild.rs`) (scripts `snapshot.lua`, `adjust.lua`, `warmup.lua`,
//! `rebuild.lua`).
//!
//! - `snapshot`: what one read returns, and its parser;
//! - `merge`: the multi-slot read of a split SKU;
//! - `rebuild`: the buyer side rebuilt from ledger rows.

mod merge;
pub mod rebuild;
pub mod snapshot;

use std::sync::Arc;

use super::buckets::{Buckets, Layout};
use super::core::Core;
use super::sku::Skus;
use super::{scripts, RedisError};
use crate::domain::SkuId;
use snapshot::parse_snapshot;
pub use snapshot::{BucketSnapshot, RedisSnapshot, WinnerRecord};

/// Snapshot, repair, warm-up and rebuild of SKUs in Redis.
pub struct Drift {
    core: Arc<Core>,
    buckets: Buckets,
    /// Warm-up registers the SKU it writes.
    skus: Skus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdjustOutcome {
    Applied {
        available: i64,
    },
    /// `available` moved since the check; nothing was changed.
    Changed,
}

impl Drift {
    pub(super) fn new(core: Arc<Core>, buckets: Buckets, skus: Skus) -> Self {
        Self {
            core,
            buckets,
            skus,
        }
    }

    /// Snapshot of one SKU; `None` when it is not loaded. Atomic for a SKU in
    /// one bucket; for a split SKU, merged from one read per bucket and judged
    /// only when stable (see `merge.rs`).
    pub async fn snapshot(
        &self,
        sku_id: SkuId,
        max_winners: usize,
    ) -> Result<Option<RedisSnapshot>, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        if layout.is_split() {
            return self.merged_snapshot(&layout, max_winners).await;
        }
        let tag = sku_id.to_string();
        Ok(self
            .bucket_snapshot(&tag, &[], max_winners)
            .await?
            .map(RedisSnapshot::from))
    }

    /// Atomic read of one bucket (`tag`), with whether each of `asked` was
    /// credited to it.
    pub async fn bucket_snapshot(
        &self,
        tag: &str,
        asked: &[String],
        max_winners: usize,
    ) -> Result<Option<BucketSnapshot>, RedisError> {
        let mut invocation = scripts::SNAPSHOT.prepare_invoke();
        let keys = &self.core.keys;
        invocation
            .key(keys.sku_at(tag))
            .key(keys.winners_at(tag))
            .key(keys.transfers_out_at(tag))
            .key(keys.transfers_in_at(tag))
            .arg(keys.reservation_prefix_at(tag))
            .arg(max_winners)
            .arg(asked.join(","));
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        parse_snapshot(&reply)
    }

    /// Moves stock by `delta` if Redis still holds what `seen` read, and sets
    /// the `adjust` term to `new_adjust` (see `adjust.lua`). A SKU in one
    /// bucket is repaired in `available`; a split SKU in its pool (then every
    /// bucket is undrained, so stock put back is sold).
    pub async fn adjust(
        &self,
        sku_id: SkuId,
        seen: &RedisSnapshot,
        delta: i64,
        new_adjust: i64,
    ) -> Result<AdjustOutcome, RedisError> {
        let (field, expected) = match seen.pool {
            Some(pool) => ("pool", pool),
            None => ("available", seen.available),
        };
        let mut invocation = scripts::ADJUST.prepare_invoke();
        invocation
            .key(self.core.keys.sku(sku_id))
            .arg(expected)
            .arg(delta)
            .arg(self.core.keys.soldout_channel())
            .arg(sku_id.get())
            .arg(new_adjust)
            .arg(field);
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match (
            reply.first().map(String::as_str),
            reply.get(1).and_then(|v| v.parse::<i64>().ok()),
        ) {
            (Some("OK"), Some(value)) => {
                if seen.pool.is_some() && delta > 0 {
                    self.buckets
                        .undrain_all(&*self.buckets.layout(sku_id).await?)
                        .await?;
                }
                let available = seen.available + value - expected;
                Ok(AdjustOutcome::Applied { available })
            }
            (Some("CHANGED"), _) => Ok(AdjustOutcome::Changed),
            _ => Err(RedisError::BadReply(format!("{reply:?}"))),
        }
    }

    /// Writes the SKU's state from MySQL (warm-up) and registers the SKU. A
    /// split SKU gets everything into its pool, every bucket emptied and
    /// primed again. `false`, nothing written, when a movement of stock
    /// newer than `moved_through` (or a cut not yet settled) is in Redis:
    /// the overwrite would lose it (`warmup.lua`).
    pub async fn warm(
        &self,
        layout: &Layout,
        available: i64,
        total: i64,
        limit_per_user: u32,
        adjust: i64,
        moved_through: u64,
    ) -> Result<bool, RedisError> {
        let sku_id = layout.sku();
        let mut invocation = scripts::WARMUP.prepare_invoke();
        invocation
            .key(self.core.keys.sku(sku_id))
            .key(self.core.keys.transfers_out_at(layout.tag(0)))
            .key(self.core.keys.cuts(sku_id))
            .arg(available)
            .arg(total)
            .arg(limit_per_user)
            .arg(adjust)
            .arg(self.core.keys.soldout_channel())
            .arg(sku_id.get())
            .arg(layout.n())
            .arg(layout.tags_field())
            .arg(moved_through);
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        if reply.first().map(String::as_str) == Some("MOVED") {
            return Ok(false);
        }
        self.buckets.forget_layout(sku_id);
        if layout.is_split() {
            self.buckets
                .init_buckets(layout, u64::from(limit_per_user), true)
                .await?;
            self.buckets.prime(layout).await?;
        }
        self.skus.register(sku_id).await?;
        Ok(true)
    }
}
