//! The commands behind "stockd nodes seen" (`ops/overview/nodes.rs` keeps
//! the view: what counts as gone, the order, the cap): every process writes
//! its heartbeat into one hash, and the console reads the hash and removes
//! the fields gone quiet. Only commands the runtime Redis user already has
//! (HSET, PEXPIRE, HGETALL, HDEL), each on a side connection, so console
//! reads never share the reserve path's multiplexed connection. As before
//! they moved here from ops, they run outside the call deadline of `core.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_redis::redis;

use super::core::Core;
use super::RedisError;

pub struct Nodes {
    core: Arc<Core>,
}

impl Nodes {
    pub(super) fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    /// Records that `name` is alive now (Redis' clock). The whole hash
    /// expires `expire_ms` after the last heartbeat of any node.
    pub async fn beat(&self, name: &str, expire_ms: u64) -> Result<(), RedisError> {
        let now_ms = self.core.now_ms().await?;
        let key = self.core.keys.nodes();
        let mut conn = self.core.hot.side().await?;
        redis::pipe()
            .cmd("HSET")
            .arg(&key)
            .arg(name)
            .arg(now_ms)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(expire_ms)
            .ignore()
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    /// Redis' clock now and every heartbeat in the hash (`name` → ms).
    pub async fn all(&self) -> Result<(u64, HashMap<String, u64>), RedisError> {
        let now_ms = self.core.now_ms().await?;
        let key = self.core.keys.nodes();
        let mut conn = self.core.hot.side().await?;
        let beats = redis::cmd("HGETALL")
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        Ok((now_ms, beats))
    }

    /// Removes the heartbeats of `names` (no-op for none).
    pub async fn forget(&self, names: &[String]) -> Result<(), RedisError> {
        if names.is_empty() {
            return Ok(());
        }
        let key = self.core.keys.nodes();
        let mut conn = self.core.hot.side().await?;
        redis::cmd("HDEL")
            .arg(&key)
            .arg(names)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }
}
