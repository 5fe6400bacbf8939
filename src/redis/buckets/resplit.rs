//! Changing a loaded SKU's bucket count: only while no buyer state of the SKU
//! lives in Redis (a buyer's counter and records are in their bucket; moving
//! them would let a buyer past the limit in a new bucket).
//!
//! Steps: drain and empty every old bucket into the pool (its buyers are
//! refused meanwhile), rewrite the home hash for the new layout in one
//! script, delete the old bucket hashes, create and prime the new ones.
//! Meant for between sales; a reservation racing it is refused, never
//! admitted twice.

use deadpool_redis::redis;

use super::Buckets;
use super::Layout;
use crate::redis::RedisError;

impl Buckets {
    /// Why the SKU's buyer state still lives, if it does: winners, outbox
    /// entries or transfers in any bucket.
    pub async fn buyer_state(&self, layout: &Layout) -> Result<Option<String>, RedisError> {
        for bucket in layout.buckets() {
            let tag = layout.tag(bucket);
            let winners = self.core.keys.winners_at(tag);
            let outbox = self.core.keys.outbox_at(tag);
            let xout = self.core.keys.transfers_out_at(tag);
            let (w, o, x): (u64, u64, u64) = self
                .core
                .run(|mut c| async move {
                    redis::pipe()
                        .cmd("SCARD")
                        .arg(&winners)
                        .cmd("XLEN")
                        .arg(&outbox)
                        .cmd("HLEN")
                        .arg(&xout)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            if w + o + x > 0 {
                return Ok(Some(format!(
                    "bucket {bucket} holds {w} reservation records, {o} outbox entries, {x} transfers"
                )));
            }
        }
        Ok(None)
    }

    /// Moves a loaded SKU from `old` to `new` (see the module doc).
    pub async fn resplit(
        &self,
        old: &Layout,
        new: &Layout,
        limit_per_user: u64,
    ) -> Result<(), RedisError> {
        if old.is_split() {
            // Drained first, so no buyer leases while its stock goes back.
            for bucket in old.buckets() {
                self.set_drained(old, bucket, true).await?;
            }
            self.reclaim(old, None).await?;
        }
        let mut invocation = crate::redis::scripts::RESPLIT.prepare_invoke();
        invocation
            .key(self.core.keys.sku(new.sku()))
            .arg(new.n())
            .arg(new.tags_field())
            .arg(self.core.keys.soldout_channel())
            .arg(new.sku().get());
        let _: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        self.drop_buckets(old).await?;
        self.layouts.forget(new.sku());
        if new.is_split() {
            self.init_buckets(new, limit_per_user, true).await?;
            self.prime(new).await?;
        }
        Ok(())
    }
}
