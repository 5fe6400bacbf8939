//! The SKU aggregate in Redis: loading stock and limit, the registry of loaded
//! SKUs, the stock view, the sold-out flag and the winners set.

use std::sync::Arc;

use deadpool_redis::redis;

use super::buckets::{BucketStock, Buckets, Layout};
use super::core::Core;
use super::sku_split_cut::cut_split;
use super::sku_step::{LoadMode, LoadOutcome, Step};
use super::RedisError;
use crate::domain::SkuId;

/// Winners read per `SSCAN` call of [`Skus::winners`] (a hint to Redis).
const WINNERS_PAGE: usize = 1_000;

/// The SKU as Redis sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkuSnapshot {
    /// Units on sale: for a split SKU, the pool plus every bucket.
    pub available: i64,
    pub limit_per_user: u64,
    pub total: u64,
    /// Nothing left anywhere: no pool, no bucket with stock or a lease to
    /// ask for, no transfer in flight.
    pub sold_out: bool,
    /// Units of a split SKU not yet leased to a bucket (0 with one bucket).
    pub pool: i64,
    /// One entry per bucket (one for a SKU that is not split).
    pub buckets: Vec<BucketStock>,
}

/// One load of a SKU's stock as [`Skus::load_sku`] was asked it: what
/// `load_sku.lua` on the home hash is run with.
#[derive(Debug, Clone, Copy)]
struct Load<'a> {
    layout: &'a Layout,
    /// The units added (negative: cut).
    delta: i64,
    available_if_absent: i64,
    limit_per_user: u64,
    total: u64,
    step: Step<'a>,
}

/// SKUs per `SADD` when the registry is rebuilt from MySQL.
const REGISTER_BATCH: usize = 1_000;

/// How long a step's marker is remembered: far longer than a restock may
/// wait for its Redis step (the sweep finishes it within seconds; a day
/// covers a MySQL that cannot record the step done for hours).
const LOAD_OP_TTL_MS: u64 = 86_400_000;

/// Loading, registering and reading SKUs: the home hash, the registry, the
/// sold-out flag and the winners sets. Cheap to clone.
#[derive(Clone)]
pub struct Skus {
    pub(super) core: Arc<Core>,
    /// A split SKU's load reclaims, creates and primes its buckets.
    pub(super) buckets: Buckets,
}

impl Skus {
    pub(super) fn new(core: Arc<Core>, buckets: Buckets) -> Self {
        Self { core, buckets }
    }

    /// Creates or restocks the SKU in Redis (see `load_sku.lua`) and registers
    /// it. A split SKU (`layout`) gets its bucket hashes too, and after stock
    /// was added every bucket is undrained and primed with a first lease.
    pub async fn load_sku(
        &self,
        layout: &Layout,
        delta: i64,
        available_if_absent: i64,
        limit_per_user: u64,
        total: u64,
        step: Step<'_>,
    ) -> Result<LoadOutcome, RedisError> {
        let load = Load {
            layout,
            delta,
            available_if_absent,
            limit_per_user,
            total,
            step,
        };
        let outcome = if layout.is_split() && delta < 0 {
            // A cut takes from the pool, and from the buckets only what the
            // pool lacks, once it knows they hold enough (`sku_split_cut.rs`).
            let pool = || self.load_home(&load);
            let available =
                || async { Ok(self.sku(layout.sku()).await?.map_or(0, |s| s.available)) };
            cut_split(&self.buckets, layout, delta, pool, available).await?
        } else {
            self.load_home(&load).await?
        };
        if layout.is_split() {
            if let LoadOutcome::Loaded { .. } = outcome {
                self.buckets
                    .init_buckets(layout, limit_per_user, false)
                    .await?;
                if total == 0 {
                    // Nothing will ever be on sale: every bucket is sold out.
                    for bucket in layout.buckets() {
                        self.buckets.set_drained(layout, bucket, true).await?;
                    }
                } else {
                    self.buckets.undrain_all(layout).await?;
                    self.buckets.prime(layout).await?;
                }
            }
        }
        Ok(outcome)
    }

    /// Runs `load_sku.lua` on the SKU's home hash (the whole SKU, or the
    /// pool of a split one).
    async fn load_home(&self, load: &Load<'_>) -> Result<LoadOutcome, RedisError> {
        let (layout, step) = (load.layout, load.step);
        let sku_id = layout.sku();
        // A cluster client re-sends a command whose connection dropped, and a
        // retry or the sweep runs a step again: the step's id makes the
        // second run a replay.
        let mut invocation = super::scripts::LOAD_SKU.prepare_invoke();
        invocation
            .key(self.core.keys.sku(sku_id))
            .key(self.core.keys.load_op(sku_id, step.op));
        if step.record_cut {
            invocation.key(self.core.keys.cuts(sku_id));
        }
        let mode = match step.mode {
            LoadMode::Create => "create",
            LoadMode::Move => "move",
        };
        invocation
            .arg(load.delta)
            .arg(load.available_if_absent)
            .arg(load.limit_per_user)
            .arg(load.total)
            .arg(self.core.keys.soldout_channel())
            .arg(sku_id.get())
            .arg(LOAD_OP_TTL_MS)
            .arg(layout.n())
            .arg(layout.tags_field())
            .arg(mode)
            .arg(step.movement_id)
            .arg(step.op)
            .arg(crate::clock::unix_ms());
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match reply.first().map(String::as_str) {
            Some("LAYOUT") => return Ok(LoadOutcome::Layout),
            Some("NOT_LOADED") => return Ok(LoadOutcome::NotLoaded),
            Some("INCLUDED") => return Ok(LoadOutcome::Included),
            _ => {}
        }
        self.buckets.forget_layout(sku_id);
        let available = reply
            .get(1)
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| RedisError::BadReply(format!("{reply:?}")))?;
        self.register(sku_id).await?;
        match reply.first().map(String::as_str) {
            Some("OK") => Ok(LoadOutcome::Loaded { available }),
            Some("BELOW_RESERVED") => Ok(LoadOutcome::BelowReserved { available }),
            _ => Err(RedisError::BadReply(format!("{reply:?}"))),
        }
    }

    /// Adds the SKU to the registry the background loops iterate over.
    pub async fn register(&self, sku_id: SkuId) -> Result<(), RedisError> {
        let registry = self.core.keys.registry();
        self.core
            .run(|mut c| async move {
                redis::cmd("SADD")
                    .arg(&registry)
                    .arg(sku_id.get())
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map(|_| ())
    }

    /// Adds every SKU of `skus` to the registry (the reconciler's repair of
    /// a registry that lost members in a failover), in bounded batches.
    pub async fn register_all(&self, skus: &[SkuId]) -> Result<(), RedisError> {
        for chunk in skus.chunks(REGISTER_BATCH) {
            let registry = self.core.keys.registry();
            let ids: Vec<u64> = chunk.iter().map(|s| s.get()).collect();
            self.core
                .run(|mut c| async move {
                    redis::cmd("SADD")
                        .arg(&registry)
                        .arg(&ids)
                        .query_async::<i64>(&mut c)
                        .await
                })
                .await?;
        }
        Ok(())
    }

    /// The SKU's stock, or `None` when the SKU is not loaded.
    pub async fn sku(&self, sku_id: SkuId) -> Result<Option<SkuSnapshot>, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        if layout.is_split() {
            let Some(stock) = self.buckets.split_stock(&layout).await? else {
                return Ok(None);
            };
            let held: i64 = stock.buckets.iter().map(|b| b.available.max(0)).sum();
            let available = stock.pool.max(0) + held;
            // Nothing anywhere and nothing on the way: no buyer of any
            // bucket can be admitted (an empty bucket not yet drained would
            // find the pool and its siblings empty and drain).
            let sold_out = available == 0 && !stock.in_transfer;
            return Ok(Some(SkuSnapshot {
                available,
                limit_per_user: stock.limit_per_user,
                total: stock.total,
                sold_out,
                pool: stock.pool,
                buckets: stock.buckets,
            }));
        }
        let key = self.core.keys.sku(sku_id);
        let fields: (Option<i64>, Option<u64>, Option<u64>) = self
            .core
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("available")
                    .arg("limit")
                    .arg("total")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(match fields {
            (Some(available), Some(limit_per_user), total) => Some(SkuSnapshot {
                available,
                limit_per_user,
                total: total.unwrap_or(0),
                sold_out: available <= 0,
                pool: 0,
                buckets: vec![BucketStock {
                    bucket: 0,
                    available,
                    drained: true,
                    sold_out: available <= 0,
                }],
            }),
            _ => None,
        })
    }

    /// Whether the SKU's bucket refuses every new buyer in Redis; `None`
    /// when it is not loaded. One bucket: marker set or nothing available. A
    /// bucket of a split SKU: its marker only (an empty bucket that is not
    /// drained still leases from the pool).
    pub async fn sold_out(&self, sku_id: SkuId, bucket: u16) -> Result<Option<bool>, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        let Some(tag) = layout.checked_tag(bucket) else {
            return Ok(None);
        };
        let key = self.core.keys.sku_at(tag);
        let (available, marker): (Option<i64>, Option<String>) = self
            .core
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("available")
                    .arg("soldout")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let split = layout.is_split();
        Ok(available.map(|a| marker.is_some() || (!split && a <= 0)))
    }

    /// The request ids that took stock of this SKU, or `None` when there are more
    /// than `cap` (too many to hold in every api node's memory) or the set
    /// changed while it was read.
    pub async fn winners(
        &self,
        sku_id: SkuId,
        bucket: u16,
        cap: usize,
    ) -> Result<Option<std::collections::HashSet<String>>, RedisError> {
        let key = self.winners_key(sku_id, bucket).await?;
        let size: usize = {
            let key = key.clone();
            self.core
                .run(|mut c| async move { redis::cmd("SCARD").arg(&key).query_async(&mut c).await })
                .await?
        };
        if size > cap {
            return Ok(None);
        }
        // Read in pages (`SSCAN … COUNT`), not with one SMEMBERS: a hot SKU
        // sells out with tens of thousands of winners, and one SMEMBERS of
        // 30,000 ids blocked its Redis 12 ms (the bench's slow log), at the
        // moment every api node loads the set. A page blocks well under a
        // millisecond. SSCAN returns every member present for the whole
        // scan; the set only grows, so a size that moved meanwhile means
        // the caller does not flag the SKU on this pass (`None`).
        let mut members = std::collections::HashSet::with_capacity(size);
        let mut cursor: u64 = 0;
        loop {
            let key = key.clone();
            let (next, page): (u64, Vec<String>) = self
                .core
                .run(|mut c| async move {
                    redis::cmd("SSCAN")
                        .arg(&key)
                        .arg(cursor)
                        .arg("COUNT")
                        .arg(WINNERS_PAGE)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            members.extend(page);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        let after: usize = self
            .core
            .run(|mut c| async move { redis::cmd("SCARD").arg(&key).query_async(&mut c).await })
            .await?;
        Ok((after == members.len()).then_some(members))
    }

    /// Size of the bucket's winners set (O(1)).
    pub async fn winners_count(&self, sku_id: SkuId, bucket: u16) -> Result<usize, RedisError> {
        let key = self.winners_key(sku_id, bucket).await?;
        self.core
            .run(|mut c| async move { redis::cmd("SCARD").arg(&key).query_async(&mut c).await })
            .await
    }

    async fn winners_key(&self, sku_id: SkuId, bucket: u16) -> Result<String, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        let tag = layout
            .checked_tag(bucket)
            .ok_or_else(|| RedisError::BadReply(format!("SKU {sku_id} has no bucket {bucket}")))?;
        Ok(self.core.keys.winners_at(tag))
    }

    /// Every SKU ever loaded into this Redis (for background loops only).
    pub async fn registered_skus(&self) -> Result<Vec<SkuId>, RedisError> {
        let key = self.core.keys.registry();
        let raw: Vec<u64> = self
            .core
            .run(|mut c| async move { redis::cmd("SMEMBERS").arg(&key).query_async(&mut c).await })
            .await?;
        let mut skus: Vec<SkuId> = raw.into_iter().filter_map(|v| SkuId::new(v).ok()).collect();
        skus.sort();
        Ok(skus)
    }
}
