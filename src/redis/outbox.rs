//! The outbox streams: the deductions the scripts recorded, waiting for the
//! broker's confirm; which stream holds an entry, and the commands that read
//! stale entries for the relay and remove confirmed ones (an entry's fields:
//! outbox_entry.rs).

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_redis::redis;

use super::buckets::Buckets;
use super::core::Core;
pub use super::outbox_entry::{availables_text, OutboxEntry};
use super::RedisError;
use crate::domain::SkuId;

/// One outbox stream: a SKU's, one bucket's of a split SKU, or one order
/// shard's (orders held line by line: `order_commit.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OutboxStream {
    /// The SKU (an order shard's stream: the order's first line's SKU, for logs).
    pub sku: SkuId,
    pub bucket: u16,
    /// The order shard, when this is an order shard's stream.
    pub order_shard: Option<u8>,
}

impl OutboxStream {
    /// A SKU's own stream (bucket 0).
    pub fn of_sku(sku: SkuId) -> Self {
        Self::of_bucket(sku, 0)
    }

    pub fn of_bucket(sku: SkuId, bucket: u16) -> Self {
        Self {
            sku,
            bucket,
            order_shard: None,
        }
    }

    /// An order shard's stream; `sku` names the order's first line.
    pub fn of_order_shard(shard: u8, sku: SkuId) -> Self {
        Self {
            sku,
            bucket: 0,
            order_shard: Some(shard),
        }
    }
}

/// The outbox streams' commands: trimming confirmed entries, reading stale
/// ones for the relay, and their length (the reserve script's backpressure
/// reads the same streams).
pub struct OutboxStreams {
    core: Arc<Core>,
    /// Which bucket streams a SKU has.
    buckets: Buckets,
}

impl OutboxStreams {
    pub(super) fn new(core: Arc<Core>, buckets: Buckets) -> Self {
        Self { core, buckets }
    }

    /// Removes outbox entries whose deduction the broker confirmed.
    pub async fn delete(&self, stream: OutboxStream, ids: &[String]) -> Result<(), RedisError> {
        if ids.is_empty() {
            return Ok(());
        }
        let key = match stream.order_shard {
            Some(shard) => self.core.keys.order_outbox(shard),
            None => {
                let layout = self.buckets.layout(stream.sku).await?;
                let Some(tag) = layout.checked_tag(stream.bucket) else {
                    return Err(RedisError::BadReply(format!("no bucket {stream:?}")));
                };
                self.core.keys.outbox_at(tag)
            }
        };
        self.core
            .run(|mut c| async move {
                redis::cmd("XDEL")
                    .arg(&key)
                    .arg(ids)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map(|_| ())
    }

    /// Outbox entries written more than `idle_ms` ago (by Redis' clock: stream ids
    /// are Redis `TIME` in milliseconds), oldest first per bucket, at most
    /// `limit` per bucket.
    pub async fn stale(
        &self,
        sku_id: SkuId,
        idle_ms: u64,
        limit: usize,
    ) -> Result<Vec<OutboxEntry>, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        let mut entries = Vec::new();
        for bucket in layout.buckets() {
            let key = self.core.keys.outbox_at(layout.tag(bucket));
            let mut stale = self.stale_in(key, idle_ms, limit).await?;
            stale.iter_mut().for_each(|e| e.bucket = bucket);
            entries.extend(stale);
        }
        Ok(entries)
    }

    /// Entries of one order shard's stream written more than `idle_ms` ago.
    pub async fn stale_orders(
        &self,
        shard: u8,
        idle_ms: u64,
        limit: usize,
    ) -> Result<Vec<OutboxEntry>, RedisError> {
        let key = self.core.keys.order_outbox(shard);
        self.stale_in(key, idle_ms, limit).await
    }

    async fn stale_in(
        &self,
        key: String,
        idle_ms: u64,
        limit: usize,
    ) -> Result<Vec<OutboxEntry>, RedisError> {
        // The clock of the node that wrote the ids: on a cluster, another
        // node's clock would shift the cutoff by their skew.
        let now_ms = self.core.now_ms_at(&key).await?;
        let Some(cutoff) = now_ms.checked_sub(idle_ms) else {
            return Ok(Vec::new());
        };
        let raw: Vec<(String, HashMap<String, String>)> = self
            .core
            .run(|mut c| async move {
                redis::cmd("XRANGE")
                    .arg(&key)
                    .arg("-")
                    .arg(format!("{cutoff}-18446744073709551615"))
                    .arg("COUNT")
                    .arg(limit)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        // a batch's entry carries several deductions: one OutboxEntry each
        let mut entries = Vec::with_capacity(raw.len());
        for (id, fields) in raw {
            entries.extend(OutboxEntry::from_fields(id, &fields)?);
        }
        Ok(entries)
    }

    /// Entries in one SKU's outbox (published or not yet confirmed), every
    /// bucket's stream counted.
    pub async fn len(&self, sku_id: SkuId) -> Result<u64, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        let mut len = 0;
        for bucket in layout.buckets() {
            let key = self.core.keys.outbox_at(layout.tag(bucket));
            len += self
                .core
                .run(|mut c| async move {
                    redis::cmd("XLEN")
                        .arg(&key)
                        .query_async::<u64>(&mut c)
                        .await
                })
                .await?;
        }
        Ok(len)
    }
}
