//! The marks that say a warm-up's probe came through the deduct queue
//! (`mq/probe.rs`): the consumer that took it sets one, the warm-up that sent
//! it waits for it. One short-lived string per probe, on a side connection
//! (never the reserve path's), with commands the runtime Redis user has.

use std::sync::Arc;

use deadpool_redis::redis;

use super::core::Core;
use super::RedisError;

/// How long a mark outlives its probe: longer than any warm-up waits.
const MARK_TTL_MS: u64 = 600_000;

pub struct Probes {
    core: Arc<Core>,
}

impl Probes {
    pub(super) fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    /// Marks the probe `id` as come through.
    pub async fn pass(&self, id: &str) -> Result<(), RedisError> {
        let key = self.core.keys.probe(id);
        let mut conn = self.core.hot.side().await?;
        redis::cmd("SET")
            .arg(&key)
            .arg(1)
            .arg("PX")
            .arg(MARK_TTL_MS)
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    /// Whether the probe `id` has come through.
    pub async fn passed(&self, id: &str) -> Result<bool, RedisError> {
        let key = self.core.keys.probe(id);
        let mut conn = self.core.hot.side().await?;
        let found: i64 = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        Ok(found == 1)
    }
}
