//! The Redis store: its pool, scripts and the one bounded `run` every call goes
//! through. The commands themselves live by aggregate, one file each:
//! `reservation.rs`, `sku.rs`, `outbox.rs` (and `drift`, `readmit`, `rebuild`,
//! `inspect` for the reconciler and warm-up).

use std::time::Duration;

use deadpool_redis::redis::{self, AsyncConnectionConfig, Script};
use deadpool_redis::{Manager, Pool};

use super::{HotConnection, Keys, RedisError};
use crate::config::RedisSettings;

const RESERVE_LUA: &str = include_str!("lua/reserve.lua");
const LOAD_SKU_LUA: &str = include_str!("lua/load_sku.lua");
const FINISH_LUA: &str = include_str!("lua/finish.lua");

pub struct RedisStore {
    pub(super) hot: HotConnection,
    pub(super) keys: Keys,
    pub(super) reserve: Script,
    pub(super) load_sku: Script,
    pub(super) finish: Script,
    pub(super) reservation_ttl_ms: u64,
    pub(super) retention_ms: u64,
    pub(super) outbox_max_len: u64,
    /// Builds the Pub/Sub connections (same URL and TLS as the pool).
    pub(super) client: redis::Client,
    pub(super) connect_timeout: Duration,
    /// Longest one call may take: `connect_timeout_ms + command_timeout_ms`.
    pub(super) call_bound: Duration,
    /// Per-buyer attempts per second and burst (`limits.per_user_*`; 0 = off).
    pub(super) buyer_rate: (f64, u32),
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

    /// A dedicated (non-pooled) Pub/Sub connection.
    pub async fn pubsub(&self) -> Result<redis::aio::PubSub, RedisError> {
        let connect = self.client.get_async_pubsub();
        tokio::time::timeout(self.connect_timeout, connect)
            .await
            .map_err(|_| RedisError::Pool("pubsub connect timed out".into()))?
            .map_err(RedisError::from)
    }

    /// Redis' clock in milliseconds: the one clock every node agrees on.
    pub async fn now_ms(&self) -> Result<u64, RedisError> {
        let (secs, micros): (u64, u64) = self
            .run(|mut c| async move { redis::cmd("TIME").query_async(&mut c).await })
            .await?;
        Ok(secs * 1000 + micros / 1000)
    }
}
