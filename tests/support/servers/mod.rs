//! Private servers for both test binaries: Redis (one server or a 6-node
//! cluster), MariaDB (one server or a primary + replica pair) and RabbitMQ
//! (one node or a 3-node cluster), each on free ports with its data under the
//! test's temp dir, optionally TLS-only ([`tls::ServerTls`]). The chaos suite
//! injects its faults through them; `tests/it` starts the TLS trio and the
//! private Redis of the tests that read server-wide statistics. The shared
//! services on 6379/3306/5672 are never touched.

pub mod broker;
pub mod mariadb;
pub mod mariadb_replica;
pub mod mysql;
pub mod process;
pub mod rabbit_cluster;
pub mod rabbitmq;
pub mod redis;
pub mod redis_cluster;
pub mod tls;

use std::future::Future;
use std::path::Path;
use std::process::Command;
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

/// [`wait_ready`] on `probe` (the protocol's own handshake) or, for a
/// TLS-only server (`tls_port`), on its port being open; the context is the
/// last `tail` lines of `log`.
pub async fn wait_up<F, Fut>(
    what: &str,
    limit: Duration,
    tls_port: Option<(std::net::Ipv4Addr, u16)>,
    probe: F,
    (log, tail): (&Path, usize),
) where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let probe = &probe;
    let ready = move || async move {
        match tls_port {
            Some((ip, port)) => port_open(ip, port).await,
            None => probe().await,
        }
    };
    wait_ready(what, limit, ready, || process::log_tail(log, tail)).await;
}

/// Whether something accepts TCP connections on `ip:port`: the readiness of
/// a TLS-only server, whose protocol handshake the plain probes cannot do.
pub async fn port_open(ip: std::net::Ipv4Addr, port: u16) -> bool {
    let connect = tokio::net::TcpStream::connect((ip, port));
    matches!(
        tokio::time::timeout(Duration::from_millis(300), connect).await,
        Ok(Ok(_))
    )
}

/// Why a server cannot run here, or `None` when its binaries are installed.
pub fn missing(binaries: &[&str]) -> Option<String> {
    binaries
        .iter()
        .find(|b| {
            let on_path = Command::new("sh")
                .args(["-c", &format!("command -v {b}")])
                .output()
                .is_ok_and(|o| o.status.success());
            !on_path && !Path::new(b).exists()
        })
        .map(|b| format!("{b} is not installed (scripts/services.sh installs it)"))
}
