//! A private redis-server for tests that read server-wide statistics.

use std::time::Duration;

use deadpool_redis::redis;

/// A private redis-server for one test (its `INFO commandstats` count only that
/// test's commands). Killed on drop.
pub struct PrivateRedis {
    child: std::process::Child,
    pub url: String,
}

impl PrivateRedis {
    pub async fn start() -> Self {
        let port = crate::ports::free_port();
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        // Owned at once, so a failed start still kills the child (Drop).
        let server = Self {
            child,
            url: format!("redis://127.0.0.1:{port}"),
        };
        let client = redis::Client::open(server.url.as_str()).unwrap();
        for _ in 0..100 {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                if redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .is_ok()
                {
                    return server;
                }
            }
            // Poll period of the wait for PING above, not a fixed wait.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("private redis-server did not start on {port}");
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

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
