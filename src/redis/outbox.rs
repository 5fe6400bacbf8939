//! Outbox stream entries: the deductions the reserve script recorded, waiting for
//! the broker's confirm. Parsing lives here so the api's publish path and the
//! relay read entries the same way, with the commands that trim the outbox.

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_redis::redis;

use super::buckets::Buckets;
use super::core::Core;
use super::RedisError;
use crate::domain::{Deduction, OrderLines, RequestId, SkuId, UserId};

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

/// One outbox entry: the stream id and the deduction it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    pub id: String,
    pub message: Deduction,
    /// The bucket whose stream holds it (0 unless the SKU is split).
    pub bucket: u16,
    /// The available its `reserved` event told of each SKU (one for a
    /// reservation; each line's, in line order, for an order); empty for an
    /// entry written before the scripts kept it.
    pub told: Vec<(SkuId, i64)>,
}

/// Availables as an outbox entry keeps them: comma-separated, in line order
/// (an unknown one as empty text).
pub fn availables_text(availables: &[Option<i64>]) -> String {
    let texts: Vec<String> = (availables.iter())
        .map(|a| a.map(|a| a.to_string()).unwrap_or_default())
        .collect();
    texts.join(",")
}

impl OutboxEntry {
    /// Builds an entry from the field/value pairs of `XRANGE`.
    pub fn from_fields(id: String, fields: &HashMap<String, String>) -> Result<Self, RedisError> {
        let get = |name: &str| {
            fields
                .get(name)
                .ok_or_else(|| RedisError::BadReply(format!("outbox entry {id} lacks {name}")))
        };
        let bad = |name: &str| RedisError::BadReply(format!("outbox entry {id}: bad {name}"));
        let num = |name: &str| -> Result<u64, RedisError> {
            get(name)?.parse::<u64>().map_err(|_| bad(name))
        };
        let message = Deduction {
            request_id: RequestId::parse(get("request_id")?).map_err(|_| bad("request_id"))?,
            sku_id: SkuId::new(num("sku_id")?).map_err(|_| bad("sku_id"))?,
            user_id: UserId::new(num("user_id")?).map_err(|_| bad("user_id"))?,
            count: u32::try_from(num("count")?).map_err(|_| bad("count"))?,
            created_ms: num("created_ms")?,
            expires_ms: num("expires_ms")?,
            // A line of an order (`order.lua`) carries the whole line list, so
            // a republished entry still names every line of its order.
            order: match fields.get("order") {
                Some(text) => Some(OrderLines::decode(text).map_err(|_| bad("order"))?),
                None => None,
            },
            client: fields.get("client").cloned(),
        };
        let skus: Vec<SkuId> = match &message.order {
            Some(lines) => lines.lines().iter().map(|l| l.sku_id).collect(),
            None => vec![message.sku_id],
        };
        let told = match fields.get("available") {
            Some(text) => (skus.into_iter())
                .zip(text.split(','))
                .filter_map(|(sku, a)| a.parse::<i64>().ok().map(|a| (sku, a)))
                .collect(),
            None => Vec::new(),
        };
        Ok(Self {
            id,
            message,
            bucket: 0,
            told,
        })
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
        raw.into_iter()
            .map(|(id, fields)| OutboxEntry::from_fields(id, &fields))
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(extra: &[(&str, &str)]) -> OutboxEntry {
        let mut fields: HashMap<String, String> = [
            ("request_id", "r1"),
            ("sku_id", "7"),
            ("user_id", "3"),
            ("count", "1"),
            ("created_ms", "10"),
            ("expires_ms", "20"),
        ]
        .iter()
        .chain(extra)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        fields.shrink_to_fit();
        OutboxEntry::from_fields("1-0".into(), &fields).unwrap()
    }

    /// The available a `reserved` event told is read back from the entry,
    /// per line for an order; an entry of an older script has none.
    #[test]
    fn an_entry_keeps_the_availables_its_reserved_event_told() {
        let sku = |n| SkuId::new(n).unwrap();
        assert_eq!(entry(&[("available", "4")]).told, vec![(sku(7), 4)]);
        let order = entry(&[("order", "7:1,9:2"), ("available", "4,0")]);
        assert_eq!(order.told, vec![(sku(7), 4), (sku(9), 0)]);
        assert!(entry(&[]).told.is_empty());
        assert_eq!(
            availables_text(&[Some(4), None, Some(0)]),
            "4,,0".to_string()
        );
    }
}
