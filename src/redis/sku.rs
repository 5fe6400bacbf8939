//! The SKU aggregate in Redis: loading stock and limit, the registry of loaded
//! SKUs, the stock view, the sold-out flag and the winners set.

use deadpool_redis::redis;

use super::{RedisError, RedisStore};
use crate::domain::SkuId;

/// The SKU as Redis sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuSnapshot {
    pub available: i64,
    pub limit_per_user: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadOutcome {
    Loaded {
        available: i64,
    },
    /// A negative delta would take Redis below zero: units are already promised.
    BelowReserved {
        available: i64,
    },
}

/// SKUs per `SADD` when the registry is rebuilt from MySQL.
const REGISTER_BATCH: usize = 1_000;

/// How long a restock's operation id is remembered: far longer than one call
/// with its retries may take.
const LOAD_OP_TTL_MS: u64 = 60_000;

impl RedisStore {
    /// Creates or restocks the SKU in Redis (see `load_sku.lua`) and registers it.
    pub async fn load_sku(
        &self,
        sku_id: SkuId,
        delta: i64,
        available_if_absent: i64,
        limit_per_user: u64,
        total: u64,
    ) -> Result<LoadOutcome, RedisError> {
        // A cluster client re-sends a command whose connection dropped, so the
        // script may run twice: the operation id makes the second run a replay.
        let op_id = uuid::Uuid::new_v4().simple().to_string();
        let mut invocation = self.load_sku.prepare_invoke();
        invocation
            .key(self.keys.sku(sku_id))
            .key(self.keys.load_op(sku_id, &op_id))
            .arg(delta)
            .arg(available_if_absent)
            .arg(limit_per_user)
            .arg(total)
            .arg(self.keys.soldout_channel())
            .arg(sku_id.get())
            .arg(LOAD_OP_TTL_MS);
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
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
        let registry = self.keys.registry();
        self.run(|mut c| async move {
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
            let registry = self.keys.registry();
            let ids: Vec<u64> = chunk.iter().map(|s| s.get()).collect();
            self.run(|mut c| async move {
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

    /// The SKU hash, or `None` when the SKU is not loaded.
    pub async fn sku(&self, sku_id: SkuId) -> Result<Option<SkuSnapshot>, RedisError> {
        let key = self.keys.sku(sku_id);
        let fields: (Option<i64>, Option<u64>, Option<u64>) = self
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
            }),
            _ => None,
        })
    }

    /// Whether the SKU is sold out in Redis (marker set or nothing available);
    /// `None` when the SKU is not loaded.
    pub async fn sold_out(&self, sku_id: SkuId) -> Result<Option<bool>, RedisError> {
        let key = self.keys.sku(sku_id);
        let (available, marker): (Option<i64>, Option<String>) = self
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("available")
                    .arg("soldout")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(available.map(|a| a <= 0 || marker.is_some()))
    }

    /// The request ids that took stock of this SKU, or `None` when there are more
    /// than `cap` (too many to hold in every api node's memory).
    pub async fn winners(
        &self,
        sku_id: SkuId,
        cap: usize,
    ) -> Result<Option<std::collections::HashSet<String>>, RedisError> {
        let key = self.keys.winners(sku_id);
        let size: usize = {
            let key = key.clone();
            self.run(|mut c| async move { redis::cmd("SCARD").arg(&key).query_async(&mut c).await })
                .await?
        };
        if size > cap {
            return Ok(None);
        }
        let members: std::collections::HashSet<String> = self
            .run(|mut c| async move { redis::cmd("SMEMBERS").arg(&key).query_async(&mut c).await })
            .await?;
        Ok(Some(members))
    }

    /// Size of the SKU's winners set (O(1)).
    pub async fn winners_count(&self, sku_id: SkuId) -> Result<usize, RedisError> {
        let key = self.keys.winners(sku_id);
        self.run(|mut c| async move { redis::cmd("SCARD").arg(&key).query_async(&mut c).await })
            .await
    }

    /// Every SKU ever loaded into this Redis (for background loops only).
    pub async fn registered_skus(&self) -> Result<Vec<SkuId>, RedisError> {
        let key = self.keys.registry();
        let raw: Vec<u64> = self
            .run(|mut c| async move { redis::cmd("SMEMBERS").arg(&key).query_async(&mut c).await })
            .await?;
        let mut skus: Vec<SkuId> = raw.into_iter().filter_map(|v| SkuId::new(v).ok()).collect();
        skus.sort();
        Ok(skus)
    }
}
