//! The hot path's connection, on a standalone server or a Redis Cluster.
//!
//! Standalone: deadpool-redis PINGs a connection every time it is checked out,
//! which would double the round trips of a reservation. A
//! `MultiplexedConnection` already pipelines concurrent requests over one
//! socket, so the hot path shares one (cloning it is cheap) and only goes back
//! to the pool when that one broke.
//!
//! Cluster: one `ClusterConnection` (cheap to clone as well) holds a link per
//! node and the slot map, reconnects a node on its own and refreshes the map
//! on MOVED. Dropping it on an I/O error would throw away every node's link
//! and the map because one node blinked, so it is kept unless its background
//! task is gone. Its client is built with explicit timeouts and a short retry
//! budget: redis-rs' cluster defaults (no response timeout, 16 retries,
//! waits from 1.28 s) would hold a request for minutes during a failover.

use std::sync::RwLock;
use std::time::Duration;

use deadpool_redis::redis::aio::MultiplexedConnection;
use deadpool_redis::redis::cluster::{ClusterClient, ClusterClientBuilder};
use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use deadpool_redis::redis::{self, Value};
use deadpool_redis::Pool;

use super::link::{NodeAddr, RedisLink};
use super::local_link::LocalLinks;
use super::RedisError;
use crate::config::RedisSettings;

/// Shortest wait before a cluster retry (redis-rs draws it between this and
/// `redis.cluster_retry_wait_ms`).
const CLUSTER_RETRY_WAIT_MIN_MS: u64 = 10;

pub struct HotConnection {
    backend: Backend,
}

enum Backend {
    Standalone {
        pool: Pool,
        shared: RwLock<Option<MultiplexedConnection>>,
        /// Each HTTP worker's own connection (`local_link`); boxed, the
        /// client it opens them with is large.
        local: Box<LocalLinks>,
    },
    Cluster {
        /// Boxed: the client is large and there is one per process.
        client: Box<ClusterClient>,
        shared: RwLock<Option<ClusterConnection>>,
        /// Serialises building the first connection: a burst of requests at
        /// start-up would otherwise each discover the whole cluster.
        building: tokio::sync::Mutex<()>,
    },
}

impl HotConnection {
    pub fn standalone(pool: Pool, local: LocalLinks) -> Self {
        Self {
            backend: Backend::Standalone {
                pool,
                shared: RwLock::new(None),
                local: Box::new(local),
            },
        }
    }

    /// The cluster client over the seed list, with stockd's timeouts and
    /// retry budget (see the module docs).
    pub fn cluster(settings: &RedisSettings) -> Result<Self, RedisError> {
        let seeds = settings.node_urls();
        let mut builder = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
            .connection_timeout(Duration::from_millis(settings.connect_timeout_ms))
            .response_timeout(Duration::from_millis(settings.command_timeout_ms))
            .overall_response_timeout(Some(Duration::from_millis(
                settings.connect_timeout_ms + settings.command_timeout_ms,
            )))
            .retries(settings.cluster_retries)
            .min_retry_wait(CLUSTER_RETRY_WAIT_MIN_MS)
            .max_retry_wait(
                settings
                    .cluster_retry_wait_ms
                    .max(CLUSTER_RETRY_WAIT_MIN_MS + 1),
            );
        let first = seeds.first().map(String::as_str).unwrap_or_default();
        if let Some(certs) = super::tls::redis_certificates(first, &settings.tls)
            .map_err(|e| RedisError::Pool(e.to_string()))?
        {
            builder = builder.certs(certs);
        }
        let client = builder.build()?;
        Ok(Self {
            backend: Backend::Cluster {
                client: Box::new(client),
                shared: RwLock::new(None),
                building: tokio::sync::Mutex::new(()),
            },
        })
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Cluster { .. })
    }

    /// Whether the cluster client is built (`false` when standalone).
    pub fn cluster_link_open(&self) -> bool {
        match &self.backend {
            Backend::Cluster { shared, .. } => shared.read().expect("lock poisoned").is_some(),
            Backend::Standalone { .. } => false,
        }
    }

    /// The standalone pool (`None` on a cluster, which has no pool).
    pub fn pool(&self) -> Option<&Pool> {
        match &self.backend {
            Backend::Standalone { pool, .. } => Some(pool),
            Backend::Cluster { .. } => None,
        }
    }

    /// A clone of the shared connection, creating it when absent; on a
    /// single-threaded runtime (an HTTP worker), that thread's own.
    ///
    /// Opening one is rare and its future large (the pool's and the
    /// client's connects, ~7 KB): it is boxed, so the future of every Redis
    /// call, which holds this one, stays small. Each await of a large future
    /// copies it as it is built and moved (spawned, boxed); under callgrind
    /// those copies were a fifth of the api's instructions per reservation.
    pub async fn get(&self) -> Result<RedisLink, RedisError> {
        match self.open_link() {
            Some(link) => Ok(link),
            None => Box::pin(self.link_anew()).await,
        }
    }

    /// The link [`Self::get`] would clone, when one is open.
    fn open_link(&self) -> Option<RedisLink> {
        match &self.backend {
            Backend::Standalone { local, .. } if LocalLinks::applies_here() => {
                local.cached().map(RedisLink::Shared)
            }
            Backend::Standalone { shared, .. } => {
                (shared.read().expect("lock poisoned").clone()).map(RedisLink::Shared)
            }
            Backend::Cluster { shared, .. } => {
                (shared.read().expect("lock poisoned").clone()).map(RedisLink::Cluster)
            }
        }
    }

    async fn link_anew(&self) -> Result<RedisLink, RedisError> {
        match &self.backend {
            Backend::Standalone { local, .. } if LocalLinks::applies_here() => {
                Ok(RedisLink::Shared(local.get().await?))
            }
            Backend::Standalone { pool, shared, .. } => {
                if let Some(conn) = shared.read().expect("lock poisoned").as_ref() {
                    return Ok(RedisLink::Shared(conn.clone()));
                }
                let pooled = pool
                    .get()
                    .await
                    .map_err(|e| RedisError::Pool(e.to_string()))?;
                let conn = deadpool_redis::Connection::take(pooled);
                *shared.write().expect("lock poisoned") = Some(conn.clone());
                Ok(RedisLink::Shared(conn))
            }
            Backend::Cluster { .. } => Ok(RedisLink::Cluster(self.cluster_conn().await?)),
        }
    }

    async fn cluster_conn(&self) -> Result<ClusterConnection, RedisError> {
        let Backend::Cluster {
            client,
            shared,
            building,
        } = &self.backend
        else {
            unreachable!("cluster_conn on a standalone backend")
        };
        if let Some(conn) = shared.read().expect("lock poisoned").as_ref() {
            return Ok(conn.clone());
        }
        let _one_at_a_time = building.lock().await;
        if let Some(conn) = shared.read().expect("lock poisoned").as_ref() {
            return Ok(conn.clone());
        }
        let conn = client.get_async_connection().await?;
        *shared.write().expect("lock poisoned") = Some(conn.clone());
        Ok(conn)
    }

    /// A connection for work that must not queue behind the hot path: a pooled
    /// one on a standalone server, the cluster client on a cluster (it already
    /// keeps one link per node and never serialises callers).
    pub async fn side(&self) -> Result<RedisLink, RedisError> {
        match &self.backend {
            Backend::Standalone { pool, .. } => pool
                .get()
                .await
                .map(RedisLink::Pooled)
                .map_err(|e| RedisError::Pool(e.to_string())),
            Backend::Cluster { .. } => Ok(RedisLink::Cluster(self.cluster_conn().await?)),
        }
    }

    /// One link per primary: the server itself when standalone, each primary
    /// of the slot map (from `CLUSTER SLOTS`) on a cluster. For commands about
    /// a node's whole keyspace or process: `SCAN`, `INFO`, `SLOWLOG`.
    pub async fn primaries(&self) -> Result<Vec<(String, RedisLink)>, RedisError> {
        if !self.is_cluster() {
            return Ok(vec![("standalone".into(), self.side().await?)]);
        }
        let mut conn = self.cluster_conn().await?;
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut conn)
            .await?;
        let mut nodes = primary_addrs(&slots);
        nodes.sort();
        nodes.dedup();
        Ok(nodes
            .into_iter()
            .map(|addr| (addr.to_string(), RedisLink::Node(conn.clone(), addr)))
            .collect())
    }

    /// `(first slot, last slot, primary)` of every slot range; one range
    /// covering every slot when standalone.
    pub async fn slot_owners(&self) -> Result<Vec<(u16, u16, String)>, RedisError> {
        if !self.is_cluster() {
            return Ok(vec![(0, 16383, "standalone".into())]);
        }
        let mut conn = self.cluster_conn().await?;
        let slots: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut conn)
            .await?;
        Ok(slot_ranges(&slots)
            .into_iter()
            .map(|(first, last, addr)| (first, last, addr.to_string()))
            .collect())
    }

    /// Runs `cmd` on the primary that owns `key`'s slot (a keyless command such
    /// as `TIME` would otherwise go to a random node).
    pub async fn on_owner_of(&self, key: &str, cmd: redis::Cmd) -> Result<Value, RedisError> {
        match &self.backend {
            Backend::Standalone { .. } => {
                let mut conn = self.get().await?;
                Ok(cmd.query_async(&mut conn).await?)
            }
            Backend::Cluster { .. } => {
                let mut conn = self.cluster_conn().await?;
                let route = Route::with_key(key, SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                Ok(conn.route_command(cmd, routing).await?)
            }
        }
    }

    /// Inspects a failed command. Standalone: a broken socket or timeout drops
    /// the shared connection so the next call builds a fresh one. Cluster: only
    /// a client whose background task has stopped is replaced.
    pub fn observe(&self, err: &RedisError) {
        match &self.backend {
            Backend::Standalone { shared, local, .. } => {
                let broken = match err {
                    RedisError::Command(e) => {
                        e.is_io_error() || e.is_connection_dropped() || e.is_timeout()
                    }
                    RedisError::Timeout => true,
                    _ => false,
                };
                // Whoever sees it, a broken socket means Redis went away for
                // every connection of the process: drop the shared one and
                // every worker's.
                if broken {
                    local.forget();
                    *shared.write().expect("lock poisoned") = None;
                }
            }
            Backend::Cluster { shared, .. } => {
                let dead = matches!(err, RedisError::Command(e)
                    if e.to_string().contains("redis_cluster: Unable to"));
                if dead {
                    *shared.write().expect("lock poisoned") = None;
                }
            }
        }
    }
}

/// The distinct primaries of a `CLUSTER SLOTS` reply: each entry is
/// `[start, end, [host, port, id, ...], replicas...]`.
fn primary_addrs(slots: &Value) -> Vec<NodeAddr> {
    slot_ranges(slots)
        .into_iter()
        .map(|(_, _, addr)| addr)
        .collect()
}

/// `(first, last, primary)` per range of a `CLUSTER SLOTS` reply.
fn slot_ranges(slots: &Value) -> Vec<(u16, u16, NodeAddr)> {
    let Value::Array(ranges) = slots else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|range| {
            let Value::Array(fields) = range else {
                return None;
            };
            let slot = |i: usize| match fields.get(i) {
                Some(Value::Int(v)) => u16::try_from(*v).ok(),
                _ => None,
            };
            let (first, last) = (slot(0)?, slot(1)?);
            let Value::Array(primary) = fields.get(2)? else {
                return None;
            };
            let host = match primary.first()? {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => return None,
            };
            let port = match primary.get(1)? {
                Value::Int(p) => u16::try_from(*p).ok()?,
                _ => return None,
            };
            Some((first, last, NodeAddr { host, port }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_primaries_of_a_slot_map_are_its_first_node_per_range() {
        let range = |start, end, port, replica| {
            Value::Array(vec![
                Value::Int(start),
                Value::Int(end),
                Value::Array(vec![bulk("127.0.0.1"), Value::Int(port), bulk("id")]),
                Value::Array(vec![bulk("127.0.0.1"), Value::Int(replica), bulk("id2")]),
            ])
        };
        let slots = Value::Array(vec![
            range(0, 5460, 7001, 7005),
            range(5461, 10922, 7002, 7006),
            range(10923, 16383, 7003, 7004),
        ]);
        let ports: Vec<u16> = primary_addrs(&slots).iter().map(|a| a.port).collect();
        assert_eq!(ports, vec![7001, 7002, 7003]);
        assert!(primary_addrs(&Value::Nil).is_empty());
    }
}
