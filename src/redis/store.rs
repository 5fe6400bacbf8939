//! The Redis store: its connection (standalone or cluster), scripts and the
//! one bounded `run` every call goes through. The commands themselves live by
//! aggregate, one file each: `reservation.rs`, `sku.rs`, `outbox.rs` (and
//! `drift`, `readmit`, `rebuild`, `inspect` for the reconciler and warm-up).

use std::time::Duration;

use deadpool_redis::redis::{self, AsyncConnectionConfig};
use deadpool_redis::{Manager, Pool};

use super::link::RedisLink;
use super::local_link::LocalLinks;
use super::scripts;
use super::{HotConnection, Keys, RedisError};
use crate::config::{RedisMode, RedisSettings};

pub struct RedisStore {
    pub(super) hot: HotConnection,
    pub(super) keys: Keys,
    pub(super) reservation_ttl_ms: u64,
    pub(super) retention_ms: u64,
    pub(super) outbox_max_len: u64,
    /// Build the Pub/Sub connections (same URLs and TLS as the commands): one
    /// client per node URL, tried in turn on every (re)subscribe.
    pub(super) pubsub_clients: Vec<redis::Client>,
    /// Which of `pubsub_clients` the next subscribe tries first.
    pub(super) pubsub_next: std::sync::atomic::AtomicUsize,
    pub(super) connect_timeout: Duration,
    /// Longest one call may take: `connect_timeout_ms + command_timeout_ms`.
    pub(super) call_bound: Duration,
    /// Per-buyer attempts per second and burst (`limits.per_user_*`; 0 = off).
    pub(super) buyer_rate: (f64, u32),
    /// Bucket layouts of split SKUs, per process (`redis/buckets`).
    pub(super) layouts: super::buckets::LayoutCache,
    /// Single-flight refills of dry buckets.
    pub(super) refills: super::buckets::RefillGates,
    /// `redis.bucket_lease_max`.
    pub(super) lease_max: i64,
}

impl RedisStore {
    /// Builds the connection with explicit timeouts (neither deadpool-redis
    /// nor the cluster client has sensible ones by default).
    pub fn new(settings: &RedisSettings, reservation_ttl_secs: u64) -> Result<Self, RedisError> {
        let pubsub_clients = settings
            .node_urls()
            .iter()
            .map(|url| crate::tls::redis_client(url, &settings.tls))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| RedisError::Pool(e.to_string()))?;
        let hot = match settings.mode {
            RedisMode::Standalone => HotConnection::standalone(
                standalone_pool(settings, pubsub_clients[0].get_connection_info().clone())?,
                LocalLinks::new(pubsub_clients[0].clone(), connection_config(settings)),
            ),
            RedisMode::Cluster => HotConnection::cluster(settings)?,
        };
        Ok(Self {
            hot,
            keys: Keys::new(&settings.key_prefix),
            reservation_ttl_ms: reservation_ttl_secs * 1000,
            retention_ms: settings.reservation_retention_secs * 1000,
            outbox_max_len: settings.outbox_max_len,
            pubsub_clients,
            pubsub_next: std::sync::atomic::AtomicUsize::new(0),
            connect_timeout: Duration::from_millis(settings.connect_timeout_ms),
            call_bound: Duration::from_millis(
                settings.connect_timeout_ms + settings.command_timeout_ms,
            ),
            buyer_rate: (0.0, 0),
            layouts: Default::default(),
            refills: Default::default(),
            lease_max: i64::from(settings.bucket_lease_max),
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

    /// The standalone pool (`None` on a cluster).
    pub fn pool(&self) -> Option<&Pool> {
        self.hot.pool()
    }

    /// Whether the cluster client is connected (`false` when standalone).
    pub fn cluster_link_open(&self) -> bool {
        self.hot.cluster_link_open()
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.hot.is_cluster()
    }

    /// A connection for reads off the hot path (see [`HotConnection::side`]).
    pub async fn side_link(&self) -> Result<RedisLink, RedisError> {
        self.hot.side().await
    }

    /// `(name, link)` per primary: `SCAN`, `INFO` and `SLOWLOG` go to each.
    pub async fn primaries(&self) -> Result<Vec<(String, RedisLink)>, RedisError> {
        self.bounded(self.hot.primaries()).await
    }

    pub(super) async fn run<T, F, Fut>(&self, op: F) -> Result<T, RedisError>
    where
        F: FnOnce(RedisLink) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        self.bounded(async {
            let conn = self.hot.get().await?;
            op(conn).await.map_err(RedisError::from)
        })
        .await
    }

    /// Every call's one deadline and failure check. The deadline covers
    /// taking (or building) a connection and the command: without it a frozen
    /// Redis costs the pool wait, the connect and the response timeouts one
    /// after the other. A failure is shown to the connection, which drops a
    /// broken standalone socket.
    pub(crate) async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, RedisError>>,
    ) -> Result<T, RedisError> {
        let result = match tokio::time::timeout(self.call_bound, call).await {
            Ok(result) => result,
            Err(_) => Err(RedisError::Timeout),
        };
        if let Err(err) = &result {
            self.hot.observe(err);
        }
        result
    }

    /// Loads every script of the registry ([`scripts::ALL`]) into the script
    /// cache, so every EVALSHA hits and [`Self::scripts_loaded`] holds. On a
    /// cluster the client sends `SCRIPT LOAD` to every primary.
    pub async fn load_scripts(&self) -> Result<(), RedisError> {
        for script in scripts::ALL {
            self.run(|mut c| async move { script.prepare_invoke().load_async(&mut c).await })
                .await?;
        }
        Ok(())
    }

    /// Whether Redis still holds every script of the registry
    /// ([`scripts::ALL`]; a restart or SCRIPT FLUSH empties the cache; EVALSHA
    /// then falls back to loading, but readiness reports it). One `SCRIPT
    /// EXISTS` with every SHA; on a cluster the client asks every primary and
    /// answers true only where all of them hold the script.
    pub async fn scripts_loaded(&self) -> Result<bool, RedisError> {
        let hashes = scripts::all_shas();
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

    /// A dedicated (non-pooled) Pub/Sub connection. On a cluster every node
    /// hears every `PUBLISH`, so any node will do: each call starts at the
    /// next node URL and tries them all, so a dead node is skipped.
    pub async fn pubsub(&self) -> Result<redis::aio::PubSub, RedisError> {
        use std::sync::atomic::Ordering;
        let start = self.pubsub_next.fetch_add(1, Ordering::Relaxed);
        let mut last = RedisError::Pool("no redis node URL".into());
        for i in 0..self.pubsub_clients.len() {
            let client = &self.pubsub_clients[(start + i) % self.pubsub_clients.len()];
            match tokio::time::timeout(self.connect_timeout, client.get_async_pubsub()).await {
                Ok(Ok(pubsub)) => return Ok(pubsub),
                Ok(Err(err)) => last = err.into(),
                Err(_) => last = RedisError::Pool("pubsub connect timed out".into()),
            }
        }
        Err(last)
    }

    /// Redis' clock in milliseconds (any node; use [`Self::now_ms_at`] to
    /// compare with times a script wrote).
    pub async fn now_ms(&self) -> Result<u64, RedisError> {
        let (secs, micros): (u64, u64) = self
            .run(|mut c| async move { redis::cmd("TIME").query_async(&mut c).await })
            .await?;
        Ok(secs * 1000 + micros / 1000)
    }

    /// The clock of the node that owns `key`: the one its scripts read, so
    /// stream ids and `created_ms` compare without inter-node skew.
    pub async fn now_ms_at(&self, key: &str) -> Result<u64, RedisError> {
        let value = self
            .bounded(self.hot.on_owner_of(key, redis::cmd("TIME")))
            .await?;
        let (secs, micros): (u64, u64) =
            redis::from_redis_value(value).map_err(|e| RedisError::BadReply(e.to_string()))?;
        Ok(secs * 1000 + micros / 1000)
    }
}

/// Every standalone connection's timeouts (neither redis-rs nor
/// deadpool-redis sets any by default).
fn connection_config(settings: &RedisSettings) -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(settings.connect_timeout_ms)))
        .set_response_timeout(Some(Duration::from_millis(settings.command_timeout_ms)))
}

/// The standalone pool, with the timeouts deadpool-redis lacks by default.
fn standalone_pool(
    settings: &RedisSettings,
    info: redis::ConnectionInfo,
) -> Result<Pool, RedisError> {
    let manager = Manager::new_with_config(info, connection_config(settings))?;
    let timeout = Some(Duration::from_millis(settings.connect_timeout_ms));
    Pool::builder(manager)
        .max_size(settings.pool_max)
        .wait_timeout(timeout)
        .create_timeout(timeout)
        .recycle_timeout(timeout)
        .runtime(deadpool_redis::Runtime::Tokio1)
        .build()
        .map_err(|e| RedisError::Pool(e.to_string()))
}
