//! "stockd nodes seen": every process writes a heartbeat into one Redis sorted
//! set (member `host:pid`, score Redis' clock in ms) from its gauge loop and
//! whenever it gathers an overview; the console lists the members heard from
//! recently. Old members are trimmed on each write, so the set stays small.

use deadpool_redis::redis;
use serde::Serialize;
use utoipa::ToSchema;

use crate::redis::{RedisError, RedisStore};

/// A node not heard from for this long is forgotten (three gauge refreshes at
/// the default `metrics.refresh_secs` of 5, plus slack).
pub const FORGET_AFTER_MS: u64 = 20_000;
/// Nodes listed at most (the set is trimmed by age, not by count).
pub const NODES_MAX: usize = 64;

/// A process that wrote a heartbeat recently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct NodeSeen {
    /// `host:pid`.
    pub name: String,
    /// Milliseconds since its last heartbeat (Redis' clock).
    pub age_ms: u64,
}

/// This process' name among the nodes: `host:pid`.
pub fn this_node() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

fn key(redis: &RedisStore) -> String {
    format!("{}nodes", redis.keys().prefix())
}

/// Records that this process is alive, and forgets nodes gone quiet.
pub async fn heartbeat(redis: &RedisStore) -> Result<(), RedisError> {
    let now_ms = redis.now_ms().await?;
    let key = key(redis);
    let mut conn = pooled(redis).await?;
    redis::pipe()
        .cmd("ZADD")
        .arg(&key)
        .arg(now_ms)
        .arg(this_node())
        .ignore()
        .cmd("ZREMRANGEBYSCORE")
        .arg(&key)
        .arg("-inf")
        .arg(now_ms.saturating_sub(FORGET_AFTER_MS))
        .ignore()
        .query_async::<()>(&mut conn)
        .await?;
    Ok(())
}

/// The nodes heard from within [`FORGET_AFTER_MS`], most recent first.
pub async fn seen(redis: &RedisStore) -> Result<Vec<NodeSeen>, RedisError> {
    let now_ms = redis.now_ms().await?;
    let key = key(redis);
    let mut conn = pooled(redis).await?;
    let raw: Vec<(String, u64)> = redis::cmd("ZREVRANGEBYSCORE")
        .arg(&key)
        .arg("+inf")
        .arg(now_ms.saturating_sub(FORGET_AFTER_MS))
        .arg("WITHSCORES")
        .arg("LIMIT")
        .arg(0)
        .arg(NODES_MAX)
        .query_async(&mut conn)
        .await?;
    Ok(raw
        .into_iter()
        .map(|(name, at_ms)| NodeSeen {
            name,
            age_ms: now_ms.saturating_sub(at_ms),
        })
        .collect())
}

/// A pooled connection, so console reads never share the reserve path's
/// multiplexed connection.
async fn pooled(redis: &RedisStore) -> Result<deadpool_redis::Connection, RedisError> {
    redis
        .pool()
        .get()
        .await
        .map_err(|e| RedisError::Pool(e.to_string()))
}
