//! Private Redis (one server or a 6-node cluster), MariaDB (one server or a
//! primary + replica pair) and RabbitMQ servers, one set per scenario, on free
//! loopback ports with data under the scenario's temp dir. The shared services
//! on 6379/3306/5672 are never touched.

pub mod broker;
pub mod mariadb;
pub mod mariadb_replica;
pub mod mysql;
pub mod process;
pub mod rabbit_cluster;
pub mod rabbitmq;
pub mod redis;
pub mod redis_cluster;

use std::future::Future;
use std::time::{Duration, Instant};

/// Pause between readiness probes.
pub const POLL: Duration = Duration::from_millis(100);

/// Polls `ready` until it returns true; panics after `limit` with `what` and
/// the log tail `context()` returns (the server's own explanation).
pub async fn wait_ready<F, Fut>(
    what: &str,
    limit: Duration,
    mut ready: F,
    context: impl Fn() -> String,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if ready().await {
            return;
        }
        if start.elapsed() > limit {
            panic!(
                "{what}: not ready after {:.1} s\n{}",
                start.elapsed().as_secs_f64(),
                context()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}
