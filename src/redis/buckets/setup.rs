//! Creating a split SKU's buckets: choosing tags on distinct primaries,
//! writing the bucket hashes, undraining after stock came back, and priming
//! each bucket with a first lease so the first buyers do not all find it dry.

use deadpool_redis::redis;

use super::tags::choose_tags;
use super::transfer::{Holder, Take};
use super::Buckets;
use super::Layout;
use crate::domain::SkuId;
use crate::redis::RedisError;

impl Buckets {
    /// A new layout of `n` buckets for `sku`, each on its own primary where
    /// the cluster has enough of them.
    pub async fn choose_layout(&self, sku: SkuId, n: u16) -> Result<Layout, RedisError> {
        if n <= 1 {
            return Ok(Layout::single(sku));
        }
        let owners = self.core.bounded(self.core.hot.slot_owners()).await?;
        let owner = |slot: u16| {
            owners
                .iter()
                .find(|(first, last, _)| (*first..=*last).contains(&slot))
                .map(|(_, _, node)| node.clone())
                .unwrap_or_default()
        };
        Ok(Layout::new(sku, choose_tags(sku, n, owner)))
    }

    /// The layout a warm-up rebuilds into: the one in Redis when it has `n`
    /// buckets, else a fresh one whose `buckets` and `tags` are written to the
    /// home hash now (without stock: the SKU does not admit until warmed).
    pub async fn prepare_layout(&self, sku: SkuId, n: u16) -> Result<Layout, RedisError> {
        let current = self.read_layout(sku).await?;
        if current.n() == n.max(1) {
            return Ok((*current).clone());
        }
        let layout = self.choose_layout(sku, n).await?;
        self.drop_buckets(&current).await?;
        let key = self.core.keys.sku(sku);
        let tags = layout.tags_field();
        let split = layout.is_split();
        self.core
            .run(|mut c| async move {
                let cmd = if split {
                    let mut cmd = redis::cmd("HSET");
                    cmd.arg(&key).arg("buckets").arg(n).arg("tags").arg(&tags);
                    cmd
                } else {
                    let mut cmd = redis::cmd("HDEL");
                    cmd.arg(&key).arg("buckets").arg("tags").arg("pool");
                    cmd
                };
                cmd.query_async::<i64>(&mut c).await
            })
            .await?;
        self.layouts.forget(sku);
        Ok(layout)
    }

    /// Deletes the hashes (stock, transfers) of buckets 1.. of a layout that
    /// is going: a stale layout cache then finds no bucket hash and reads the
    /// layout again, instead of selling their old stock.
    pub(super) async fn drop_buckets(&self, old: &Layout) -> Result<(), RedisError> {
        for bucket in old.buckets().skip(1) {
            let tag = old.tag(bucket);
            // One slot: the three keys share the bucket's tag.
            let keys = [
                self.core.keys.sku_at(tag),
                self.core.keys.transfers_out_at(tag),
                self.core.keys.transfers_in_at(tag),
            ];
            self.core
                .run(|mut c| async move {
                    redis::cmd("DEL")
                        .arg(&keys)
                        .query_async::<i64>(&mut c)
                        .await
                })
                .await?;
        }
        Ok(())
    }

    /// Creates or updates the hashes of buckets 1.. (`reset`: empties them).
    pub async fn init_buckets(
        &self,
        layout: &Layout,
        limit_per_user: u64,
        reset: bool,
    ) -> Result<(), RedisError> {
        for bucket in layout.buckets().skip(1) {
            let tag = layout.tag(bucket);
            let mut invocation = crate::redis::scripts::BUCKET_INIT.prepare_invoke();
            invocation
                .key(self.core.keys.sku_at(tag))
                .key(self.core.keys.transfers_out_at(tag))
                .arg(layout.n())
                .arg(bucket)
                .arg(limit_per_user)
                .arg(if reset { "reset" } else { "keep" });
            let _: Vec<String> = self
                .core
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
        }
        Ok(())
    }

    /// Clears every bucket's `drained` flag: stock came back to the pool.
    pub async fn undrain_all(&self, layout: &Layout) -> Result<(), RedisError> {
        for bucket in layout.buckets() {
            self.set_drained(layout, bucket, false).await?;
        }
        Ok(())
    }

    /// Leases a first chunk to every bucket.
    pub async fn prime(&self, layout: &Layout) -> Result<(), RedisError> {
        let lease = Take {
            min: 1,
            max: self.lease_max,
            divisor: 2 * i64::from(layout.n()),
        };
        for bucket in layout.buckets() {
            self.transfer(layout, Holder::Pool, Holder::Bucket(bucket), lease)
                .await?;
        }
        Ok(())
    }
}
