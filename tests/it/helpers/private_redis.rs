//! A private redis-server for tests that read server-wide statistics.

use deadpool_redis::redis;

use crate::servers::process::TempDir;
use crate::servers::redis::{Redis, RedisOptions};

/// A private redis-server for one test (its `INFO commandstats` count only that
/// test's commands): the shared starter (tests/support/servers/redis.rs)
/// without persistence, in a temp dir of its own. Killed on drop.
pub struct PrivateRedis {
    pub url: String,
    // Dropped in this order: the server, then its directory.
    _server: Redis,
    _dir: TempDir,
}

impl PrivateRedis {
    pub async fn start() -> Self {
        let dir = TempDir::new("it-redis");
        let server = Redis::start_with(&dir.path, RedisOptions::plain()).await;
        Self {
            url: server.url(),
            _server: server,
            _dir: dir,
        }
    }

    /// `calls` of EVAL + EVALSHA so far.
    pub async fn script_calls(&self) -> u64 {
        info(&self.url, "commandstats")
            .await
            .lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .filter_map(|l| {
                l.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    }
}

/// `INFO <section>` of the server at `url`, over a connection of its own
/// (closed again before the call returns; it counts in `connected_clients`).
pub async fn info(url: &str, section: &str) -> String {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("INFO")
        .arg(section)
        .query_async(&mut conn)
        .await
        .unwrap()
}
