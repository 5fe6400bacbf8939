//! One connection type for every way stockd talks to Redis, so each command
//! and script is written once and runs on a standalone server and on a Redis
//! Cluster alike.
//!
//! - `Shared`: the hot path's multiplexed connection to a standalone server.
//! - `Pooled`: a pooled standalone connection for work that must not queue
//!   behind the hot path (console reads, bench set-up).
//! - `Cluster`: the cluster client. It routes each command by its first key
//!   (`KEYS[1]` of a script), follows MOVED/ASK, and keeps one link per node.
//! - `Node`: the cluster client pinned to one node, for the commands that are
//!   about a node rather than a key (`SCAN`, `INFO`, `SLOWLOG`, `TIME`).

use deadpool_redis::redis::aio::{ConnectionLike, MultiplexedConnection};
use deadpool_redis::redis::cluster_async::ClusterConnection;
use deadpool_redis::redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use deadpool_redis::redis::{Cmd, Pipeline, RedisFuture, Value};

pub enum RedisLink {
    Shared(MultiplexedConnection),
    Pooled(deadpool_redis::Connection),
    Cluster(ClusterConnection),
    Node(ClusterConnection, NodeAddr),
}

/// A node of a cluster: host and port as the cluster announces them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeAddr {
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl NodeAddr {
    fn routing(&self) -> SingleNodeRoutingInfo {
        SingleNodeRoutingInfo::ByAddress {
            host: self.host.clone(),
            port: self.port,
        }
    }
}

impl ConnectionLike for RedisLink {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Shared(c) => c.req_packed_command(cmd),
            Self::Pooled(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
            Self::Node(c, addr) => {
                let routing = RoutingInfo::SingleNode(addr.routing());
                Box::pin(async move { c.route_command(cmd.clone(), routing).await })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Shared(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Pooled(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Node(c, addr) => {
                let routing = addr.routing();
                Box::pin(async move {
                    c.route_pipeline(pipeline.clone(), offset, count, routing)
                        .await
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Shared(c) => c.get_db(),
            Self::Pooled(c) => c.get_db(),
            Self::Cluster(c) | Self::Node(c, _) => c.get_db(),
        }
    }
}
