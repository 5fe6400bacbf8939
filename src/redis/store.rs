//! Typed access to everything stockd keeps in Redis.

use std::collections::HashMap;
use std::time::Duration;

use deadpool_redis::redis::{self, AsyncConnectionConfig, Script};
use deadpool_redis::{Manager, Pool};

use super::outbox::OutboxEntry;
use super::reply::{parse_reserve_reply, ReserveRequest};
use super::{HotConnection, Keys, RedisError};
use crate::config::RedisSettings;
use crate::domain::{RequestId, Reservation, ReservationStatus, ReserveOutcome, SkuId, UserId};

const RESERVE_LUA: &str = include_str!("lua/reserve.lua");
const LOAD_SKU_LUA: &str = include_str!("lua/load_sku.lua");
const FINISH_LUA: &str = include_str!("lua/finish.lua");

/// The SKU as Redis sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkuSnapshot {
    pub available: i64,
    pub limit_per_user: u64,
    pub total: u64,
}

/// What `finish.lua` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishOutcome {
    Applied,
    Already,
    Tombstone,
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

pub struct RedisStore {
    hot: HotConnection,
    keys: Keys,
    reserve: Script,
    load_sku: Script,
    finish: Script,
    reservation_ttl_ms: u64,
    retention_ms: u64,
    outbox_max_len: u64,
    /// Builds the Pub/Sub connections (same URL and TLS as the pool).
    client: redis::Client,
    connect_timeout: Duration,
    /// Longest one call may take: `connect_timeout_ms + command_timeout_ms`.
    call_bound: Duration,
    /// Per-buyer attempts per second and burst (`limits.per_user_*`; 0 = off).
    buyer_rate: (f64, u32),
}

impl RedisStore {
    /// Builds the pool with explicit timeouts (deadpool-redis has none by default).
    pub fn new(settings: &RedisSettings, reservation_ttl_secs: u64) -> Result<Self, RedisError> {
        let conn_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_millis(settings.connect_timeout_ms)))
            .set_response_timeout(Some(Duration::from_millis(settings.command_timeout_ms)));
        let client = crate::tls::redis_client(&settings.url, &settings.tls)
            .map_err(|e| RedisError::Pool(e.to_string()))?;
        let manager = Manager::new_with_config(client.get_connection_info().clone(), conn_config)?;
        let timeout = Some(Duration::from_millis(settings.connect_timeout_ms));
        let pool = Pool::builder(manager)
            .max_size(settings.pool_max)
            .wait_timeout(timeout)
            .create_timeout(timeout)
            .recycle_timeout(timeout)
            .runtime(deadpool_redis::Runtime::Tokio1)
            .build()
            .map_err(|e| RedisError::Pool(e.to_string()))?;
        Ok(Self {
            hot: HotConnection::new(pool),
            keys: Keys::new(&settings.key_prefix),
            reserve: Script::new(RESERVE_LUA),
            load_sku: Script::new(LOAD_SKU_LUA),
            finish: Script::new(FINISH_LUA),
            reservation_ttl_ms: reservation_ttl_secs * 1000,
            retention_ms: settings.reservation_retention_secs * 1000,
            outbox_max_len: settings.outbox_max_len,
            client,
            connect_timeout: Duration::from_millis(settings.connect_timeout_ms),
            call_bound: Duration::from_millis(
                settings.connect_timeout_ms + settings.command_timeout_ms,
            ),
            buyer_rate: (0.0, 0),
        })
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Turns on the per-buyer rate limit the reserve script enforces.
    pub fn with_buyer_rate(mut self, per_second: f64, burst: u32) -> Self {
        self.buyer_rate = (per_second, burst);
        self
    }

    /// How long a reservation record lives in Redis from its creation: the
    /// time to pay plus the retention for replays.
    pub fn record_lifetime_ms(&self) -> u64 {
        self.reservation_ttl_ms + self.retention_ms
    }

    pub fn pool(&self) -> &Pool {
        self.hot.pool()
    }

    pub(super) async fn run<T, F, Fut>(&self, op: F) -> Result<T, RedisError>
    where
        F: FnOnce(redis::aio::MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        // One deadline for the whole call: taking (or building) a connection
        // and the command. Without it a frozen Redis costs the pool wait, the
        // connect and the response timeouts one after the other.
        let call = async {
            let conn = self.hot.get().await?;
            op(conn).await.map_err(RedisError::from)
        };
        let result = match tokio::time::timeout(self.call_bound, call).await {
            Ok(result) => result,
            Err(_) => Err(RedisError::Timeout),
        };
        if let Err(err) = &result {
            self.hot.observe(err);
        }
        result
    }

    /// Loads every script into the script cache, so the hot path's EVALSHA hits.
    pub async fn load_scripts(&self) -> Result<(), RedisError> {
        for script in [&self.reserve, &self.load_sku, &self.finish] {
            self.run(|mut c| async move { script.prepare_invoke().load_async(&mut c).await })
                .await?;
        }
        Ok(())
    }

    /// Whether Redis still holds every script (a restart or SCRIPT FLUSH empties
    /// the cache; EVALSHA then falls back to loading, but readiness reports it).
    pub async fn scripts_loaded(&self) -> Result<bool, RedisError> {
        let hashes: Vec<String> = [&self.reserve, &self.load_sku, &self.finish]
            .iter()
            .map(|s| s.get_hash().to_string())
            .collect();
        let found: Vec<bool> = self
            .run(|mut c| async move {
                redis::cmd("SCRIPT")
                    .arg("EXISTS")
                    .arg(&hashes)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(found.iter().all(|f| *f))
    }

    pub async fn ping(&self) -> Result<(), RedisError> {
        self.run(|mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await })
            .await
            .map(|_| ())
    }

    /// Stage 1: the atomic admission decision (one EVALSHA round trip).
    pub async fn reserve(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
    ) -> Result<ReserveOutcome, RedisError> {
        let mut invocation = self.reserve.prepare_invoke();
        invocation
            .key(self.keys.sku(sku_id))
            .key(self.keys.reservation(sku_id, request_id))
            .key(self.keys.user(sku_id, user_id))
            .key(self.keys.outbox(sku_id))
            .key(self.keys.winners(sku_id))
            .key(self.keys.rate(sku_id, user_id))
            .arg(request_id.as_str())
            .arg(sku_id.get())
            .arg(user_id.get())
            .arg(count)
            .arg(self.reservation_ttl_ms)
            .arg(self.retention_ms)
            .arg(self.outbox_max_len)
            .arg(self.keys.soldout_channel())
            .arg(self.buyer_rate.0)
            .arg(self.buyer_rate.1);
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        let req = ReserveRequest {
            sku_id,
            request_id,
            user_id,
            count,
        };
        parse_reserve_reply(&req, &reply)
    }

    /// Mirrors a final state decided in MySQL (see `finish.lua`); idempotent.
    /// `returns_stock`: a rejection whose unit stays in MySQL's stock.
    pub async fn finish(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
        status: ReservationStatus,
        returns_stock: bool,
    ) -> Result<FinishOutcome, RedisError> {
        assert!(
            status != ReservationStatus::Reserved,
            "finish needs a final status"
        );
        let mut invocation = self.finish.prepare_invoke();
        invocation
            .key(self.keys.sku(sku_id))
            .key(self.keys.reservation(sku_id, request_id))
            .key(self.keys.user(sku_id, user_id))
            .arg(status.as_str())
            .arg(user_id.get())
            .arg(count)
            .arg(self.reservation_ttl_ms + self.retention_ms)
            .arg(self.keys.soldout_channel())
            .arg(sku_id.get())
            .arg(if returns_stock { "1" } else { "0" });
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match reply.first().map(String::as_str) {
            Some("APPLIED") => Ok(FinishOutcome::Applied),
            Some("ALREADY") => Ok(FinishOutcome::Already),
            Some("TOMBSTONE") => Ok(FinishOutcome::Tombstone),
            _ => Err(RedisError::BadReply(format!("{reply:?}"))),
        }
    }

    /// Creates or restocks the SKU in Redis (see `load_sku.lua`) and registers it.
    pub async fn load_sku(
        &self,
        sku_id: SkuId,
        delta: i64,
        available_if_absent: i64,
        limit_per_user: u64,
        total: u64,
    ) -> Result<LoadOutcome, RedisError> {
        let mut invocation = self.load_sku.prepare_invoke();
        invocation
            .key(self.keys.sku(sku_id))
            .arg(delta)
            .arg(available_if_absent)
            .arg(limit_per_user)
            .arg(total)
            .arg(self.keys.soldout_channel())
            .arg(sku_id.get());
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

    /// A dedicated (non-pooled) Pub/Sub connection.
    pub async fn pubsub(&self) -> Result<redis::aio::PubSub, RedisError> {
        let connect = self.client.get_async_pubsub();
        tokio::time::timeout(self.connect_timeout, connect)
            .await
            .map_err(|_| RedisError::Pool("pubsub connect timed out".into()))?
            .map_err(RedisError::from)
    }

    /// The reservation record held in Redis, if it still exists.
    pub async fn reservation(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
    ) -> Result<Option<Reservation>, RedisError> {
        let key = self.keys.reservation(sku_id, request_id);
        let map: HashMap<String, String> = self
            .run(|mut c| async move { redis::cmd("HGETALL").arg(&key).query_async(&mut c).await })
            .await?;
        if map.is_empty() {
            return Ok(None);
        }
        let bad = || RedisError::BadReply(format!("reservation record {map:?}"));
        let num = |name: &str| {
            map.get(name)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(bad)
        };
        Ok(Some(Reservation {
            request_id: request_id.clone(),
            sku_id,
            user_id: UserId::new(num("user")?).map_err(|_| bad())?,
            count: u32::try_from(num("count")?).map_err(|_| bad())?,
            status: map
                .get("status")
                .and_then(|s| ReservationStatus::parse(s))
                .ok_or_else(bad)?,
            created_at_ms: num("created_ms")?,
            expires_at_ms: num("expires_ms")?,
        }))
    }

    /// Removes outbox entries whose deduction the broker confirmed.
    pub async fn outbox_delete(&self, sku_id: SkuId, ids: &[String]) -> Result<(), RedisError> {
        if ids.is_empty() {
            return Ok(());
        }
        let key = self.keys.outbox(sku_id);
        self.run(|mut c| async move {
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
    /// are Redis `TIME` in milliseconds), oldest first, at most `limit`.
    pub async fn outbox_stale(
        &self,
        sku_id: SkuId,
        idle_ms: u64,
        limit: usize,
    ) -> Result<Vec<OutboxEntry>, RedisError> {
        let now_ms = self.now_ms().await?;
        let Some(cutoff) = now_ms.checked_sub(idle_ms) else {
            return Ok(Vec::new());
        };
        let key = self.keys.outbox(sku_id);
        let raw: Vec<(String, HashMap<String, String>)> = self
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

    /// Entries in one SKU's outbox (published or not yet confirmed).
    pub async fn outbox_len(&self, sku_id: SkuId) -> Result<u64, RedisError> {
        let key = self.keys.outbox(sku_id);
        self.run(|mut c| async move { redis::cmd("XLEN").arg(&key).query_async(&mut c).await })
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

    /// Redis' clock in milliseconds: the one clock every node agrees on.
    pub async fn now_ms(&self) -> Result<u64, RedisError> {
        let (secs, micros): (u64, u64) = self
            .run(|mut c| async move { redis::cmd("TIME").query_async(&mut c).await })
            .await?;
        Ok(secs * 1000 + micros / 1000)
    }
}
