//! The Redis store: the one thing `Resources` holds for Redis. It builds the
//! connection (standalone or cluster) and hands out the aggregates, each a
//! type of its own over the one shared [`Core`] (connection, keys, bounded
//! `run`):
//!
//! | accessor           | type               | file                         |
//! |--------------------|--------------------|------------------------------|
//! | `reservations()`   | [`Reservations`]   | `reservation.rs`, `readmit.rs` |
//! | `orders()`         | [`Orders`]         | `orders.rs`                  |
//! | `skus()`           | [`Skus`]           | `sku.rs`                     |
//! | `buckets()`        | [`Buckets`]        | `buckets/`                   |
//! | `outbox()`         | [`OutboxStreams`]  | `outbox.rs`                  |
//! | `drift()`          | [`Drift`]          | `drift/`                     |
//! | `inspect()`        | [`Inspection`]     | `inspect.rs`                 |
//! | `subscriptions()`  | [`Subscriptions`]  | `subscriptions.rs`           |
//! | `nodes()`          | [`Nodes`]          | `nodes.rs`                   |
//! | `probes()`         | [`Probes`]         | `probes.rs`                  |
//! | `budget()`         | [`HoldBudget`]     | `budget.rs`                  |
//! | `pass_claims()`    | [`PassClaims`]     | `pass_claims.rs`             |
//!
//! The store itself keeps what concerns the connection as a whole: health
//! (`ping`, `scripts_loaded`), the script cache, the clock, side links.
//!
//! The aggregates stay behind the store rather than each in `Resources`:
//! they must share one layout cache and one set of refill gates per process
//! (a second `Buckets` would cache layouts the first one forgets), and
//! building them all here is what guarantees it; callers keep one handle
//! (`res.redis`) to pass around and to build in tests.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis::{self, AsyncConnectionConfig};
use deadpool_redis::{Manager, Pool};

use super::admission::{Batching, ReserveArgs};
use super::buckets::Buckets;
use super::budget::HoldBudget;
use super::core::Core;
use super::drift::Drift;
use super::inspect::Inspection;
use super::link::RedisLink;
use super::local_link::LocalLinks;
use super::nodes::Nodes;
use super::orders::Orders;
use super::outbox::OutboxStreams;
use super::pass_claims::PassClaims;
use super::probes::Probes;
use super::reservation::Reservations;
use super::scripts;
use super::sku::Skus;
use super::subscriptions::Subscriptions;
use super::{HotConnection, Keys, RedisError};
use crate::config::{RedisMode, RedisSettings};

pub struct RedisStore {
    core: Arc<Core>,
    reservations: Reservations,
    orders: Orders,
    skus: Skus,
    buckets: Buckets,
    outbox: OutboxStreams,
    drift: Drift,
    inspection: Inspection,
    subscriptions: Subscriptions,
    nodes: Nodes,
    probes: Probes,
    budget: HoldBudget,
    pass_claims: PassClaims,
}

impl RedisStore {
    /// Builds the connection with explicit timeouts (neither deadpool-redis
    /// nor the cluster client has sensible ones by default).
    pub fn new(settings: &RedisSettings, reservation_ttl_secs: u64) -> Result<Self, RedisError> {
        // The Pub/Sub connections use the same URLs and TLS as the commands.
        let pubsub_clients = settings
            .node_urls()
            .iter()
            .map(|url| super::tls::redis_client(url, &settings.tls))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| RedisError::Pool(e.to_string()))?;
        let hot = match settings.mode {
            RedisMode::Standalone => HotConnection::standalone(
                standalone_pool(settings, pubsub_clients[0].get_connection_info().clone())?,
                LocalLinks::new(pubsub_clients[0].clone(), connection_config(settings)),
            ),
            RedisMode::Cluster => HotConnection::cluster(settings)?,
        };
        let connect_timeout = Duration::from_millis(settings.connect_timeout_ms);
        let core = Arc::new(Core::new(
            hot,
            Keys::new(&settings.key_prefix),
            connect_timeout + Duration::from_millis(settings.command_timeout_ms),
        ));
        let buckets = Buckets::new(core.clone(), i64::from(settings.bucket_lease_max));
        let skus = Skus::new(core.clone(), buckets.clone());
        let args = ReserveArgs {
            ttl_ms: reservation_ttl_secs * 1000,
            retention_ms: settings.reservation_retention_secs * 1000,
            outbox_max_len: settings.outbox_max_len,
            buyer_rate: (0.0, 0),
            max_lapsed: 0,
        };
        let cluster = settings.mode == RedisMode::Cluster;
        let batching = Batching {
            max: settings.batch_max,
            in_flight: settings.batch_in_flight,
            linger: Duration::from_micros(settings.batch_linger_us),
            queue_max: settings.batch_queue_max,
        };
        let budget = HoldBudget::off(core.clone());
        Ok(Self {
            orders: Orders::new(core.clone(), args, batching, cluster),
            reservations: Reservations::new(
                core.clone(),
                buckets.clone(),
                budget.clone(),
                args,
                batching,
            ),
            budget,
            outbox: OutboxStreams::new(core.clone(), buckets.clone()),
            drift: Drift::new(core.clone(), buckets.clone(), skus.clone()),
            inspection: Inspection::new(core.clone(), buckets.clone()),
            subscriptions: Subscriptions::new(pubsub_clients, connect_timeout),
            nodes: Nodes::new(core.clone()),
            probes: Probes::new(core.clone()),
            pass_claims: PassClaims::new(core.clone()),
            skus,
            buckets,
            core,
        })
    }

    /// Turns on the per-buyer rate limit the reserve and order scripts
    /// enforce (`limits.per_user_*`; 0 = off).
    pub fn with_buyer_rate(mut self, per_second: f64, burst: u32) -> Self {
        self.reservations.set_buyer_rate(per_second, burst);
        self.orders.follow(self.reservations.args());
        self
    }

    /// Turns on the cap on lapsed holds the reserve and order scripts
    /// enforce (`limits.max_lapsed_holds`; 0 = off).
    pub fn with_lapse_limit(mut self, max_lapsed: u32) -> Self {
        self.reservations.set_lapse_limit(max_lapsed);
        self.orders.follow(self.reservations.args());
        self
    }

    /// Turns on the hold budget per buyer (`limits.buyer_max_live_units`;
    /// 0 = off): the handlers claim it before the admission, and every
    /// finish gives it back. `claim_life_ms`: `budget::claim_life_ms`.
    pub fn with_hold_budget(mut self, max_units: u32, claim_life_ms: u64) -> Self {
        self.budget = self.budget.on(max_units, claim_life_ms);
        self.reservations.set_budget(self.budget.clone());
        self
    }

    pub fn budget(&self) -> &HoldBudget {
        &self.budget
    }

    pub fn pass_claims(&self) -> &PassClaims {
        &self.pass_claims
    }

    pub fn reservations(&self) -> &Reservations {
        &self.reservations
    }

    pub fn orders(&self) -> &Orders {
        &self.orders
    }

    pub fn skus(&self) -> &Skus {
        &self.skus
    }

    pub fn buckets(&self) -> &Buckets {
        &self.buckets
    }

    pub fn outbox(&self) -> &OutboxStreams {
        &self.outbox
    }

    pub fn probes(&self) -> &Probes {
        &self.probes
    }

    pub fn drift(&self) -> &Drift {
        &self.drift
    }

    pub fn inspect(&self) -> &Inspection {
        &self.inspection
    }

    pub fn subscriptions(&self) -> &Subscriptions {
        &self.subscriptions
    }

    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    pub fn keys(&self) -> &Keys {
        &self.core.keys
    }

    /// The standalone pool (`None` on a cluster).
    pub fn pool(&self) -> Option<&Pool> {
        self.core.hot.pool()
    }

    /// Whether the cluster client is connected (`false` when standalone).
    pub fn cluster_link_open(&self) -> bool {
        self.core.hot.cluster_link_open()
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.core.hot.is_cluster()
    }

    /// A connection for reads off the hot path (see [`HotConnection::side`]).
    pub async fn side_link(&self) -> Result<RedisLink, RedisError> {
        self.core.hot.side().await
    }

    /// `(name, link)` per primary: `SCAN`, `INFO` and `SLOWLOG` go to each.
    pub async fn primaries(&self) -> Result<Vec<(String, RedisLink)>, RedisError> {
        self.core.bounded(self.core.hot.primaries()).await
    }

    /// Loads every script of the registry ([`scripts::ALL`]) into the script
    /// cache, so every EVALSHA hits and [`Self::scripts_loaded`] holds. On a
    /// cluster the client sends `SCRIPT LOAD` to every primary.
    pub async fn load_scripts(&self) -> Result<(), RedisError> {
        for script in scripts::ALL {
            self.core
                .run(|mut c| async move { script.prepare_invoke().load_async(&mut c).await })
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
            .core
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
        self.core
            .run(|mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await })
            .await
            .map(|_| ())
    }

    /// Redis' clock in milliseconds (any node).
    pub async fn now_ms(&self) -> Result<u64, RedisError> {
        self.core.now_ms().await
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
