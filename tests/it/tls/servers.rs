//! Private TLS-only redis-server, mariadbd and RabbitMQ on free loopback
//! ports, each with its own data dir under the test's temp dir. Every process
//! leads its own process group and is killed (SIGKILL to the group, by pid)
//! when dropped — also when the test panics. The shared services on 6379,
//! 3306 and 5672 are never touched.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::certs::Pki;

/// A fresh RabbitMQ node boots in 5–20 s on a busy 2-core machine.
const RABBIT_START_LIMIT: Duration = Duration::from_secs(120);
/// mariadb-install-db + first start: a few seconds; generous for busy CI.
const MARIADB_START_LIMIT: Duration = Duration::from_secs(90);
const REDIS_START_LIMIT: Duration = Duration::from_secs(20);
/// Between readiness probes.
const POLL: Duration = Duration::from_millis(200);
/// The broker scripts run directly: the /usr/sbin wrappers `su` to the
/// rabbitmq user, which would lose the environment and cannot write our dir.
const RABBIT_BIN: &str = "/usr/lib/rabbitmq/bin";
const MARIADBD: &str = "/usr/sbin/mariadbd";

use crate::owned::OwnedProcess;

pub use crate::ports::free_port;

fn port_open(port: u16) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

/// Waits until `ready` holds; panics with the server's log after `limit`.
pub async fn wait_ready<F, Fut>(server: &mut OwnedProcess, limit: Duration, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if let Some(status) = server.exited() {
            panic!("{} exited ({status}):\n{}", server.name, server.log_tail());
        }
        if ready().await {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "{} not ready after {limit:?}:\n{}",
            server.name,
            server.log_tail()
        );
        // Poll period of the wait for `ready` above (bounded by `limit`).
        tokio::time::sleep(POLL).await;
    }
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

/// redis-server with only a TLS port; clients must show a certificate.
pub struct TlsRedis {
    pub port: u16,
    _process: OwnedProcess,
}

impl TlsRedis {
    pub async fn start(dir: &Path, pki: &Pki) -> Self {
        let port = free_port();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", "0", "--tls-port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--tls-cert-file")
            .arg(&pki.server_cert)
            .arg("--tls-key-file")
            .arg(&pki.server_key)
            .arg("--tls-ca-cert-file")
            .arg(&pki.ca)
            .args(["--tls-auth-clients", "yes"]);
        let mut process = OwnedProcess::spawn(
            &format!("redis-server tls :{port}"),
            cmd,
            &dir.join("redis.log"),
        );
        wait_ready(&mut process, REDIS_START_LIMIT, || async move {
            port_open(port)
        })
        .await;
        Self {
            port,
            _process: process,
        }
    }
}

/// mariadbd on a private datadir that refuses connections without TLS.
pub struct TlsMariadb {
    pub port: u16,
    _process: OwnedProcess,
}

impl TlsMariadb {
    pub async fn start(dir: &Path, pki: &Pki) -> Self {
        let datadir = dir.join("mariadb");
        let install = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
            ])
            .output()
            .expect("mariadb-install-db runs");
        assert!(
            install.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&install.stderr)
        );
        let port = free_port();
        let mut cmd = Command::new(MARIADBD);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", dir.join("mariadb.sock").display()))
            .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
            .arg("--user=root")
            .args(["--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M"])
            .arg(format!("--ssl-cert={}", pki.server_cert.display()))
            .arg(format!("--ssl-key={}", pki.server_key.display()))
            .arg(format!("--ssl-ca={}", pki.ca.display()))
            .arg("--require-secure-transport=ON");
        let mut process = OwnedProcess::spawn(
            &format!("mariadbd tls :{port}"),
            cmd,
            &dir.join("mariadb.log"),
        );
        wait_ready(&mut process, MARIADB_START_LIMIT, || async move {
            port_open(port)
        })
        .await;
        Self {
            port,
            _process: process,
        }
    }
}

/// A RabbitMQ node with only a TLS listener, its own epmd, node name, dirs and
/// Erlang cookie (HOME); clients must show a certificate.
pub struct TlsRabbit {
    pub port: u16,
    // Dropped in this order: the node, then its epmd.
    process: Option<OwnedProcess>,
    _epmd: OwnedProcess,
}

impl TlsRabbit {
    pub async fn start(dir: &Path, pki: &Pki) -> Self {
        let dir = dir.join("rabbitmq");
        std::fs::create_dir_all(&dir).unwrap();
        let (port, dist_port, epmd_port) = (free_port(), free_port(), free_port());
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        std::fs::write(dir.join("rabbitmq-env.conf"), "").unwrap();
        let conf = format!(
            "listeners.tcp = none\n\
             listeners.ssl.default = 127.0.0.1:{port}\n\
             ssl_options.cacertfile = {}\n\
             ssl_options.certfile = {}\n\
             ssl_options.keyfile = {}\n\
             ssl_options.verify = verify_peer\n\
             ssl_options.fail_if_no_peer_cert = true\n",
            pki.ca.display(),
            pki.server_cert.display(),
            pki.server_key.display()
        );
        std::fs::write(dir.join("rabbitmq.conf"), conf).unwrap();
        let mut epmd_cmd = Command::new("epmd");
        epmd_cmd.args(["-port", &epmd_port.to_string(), "-address", "127.0.0.1"]);
        let epmd = OwnedProcess::spawn(
            &format!("epmd :{epmd_port}"),
            epmd_cmd,
            &dir.join("epmd.log"),
        );
        let mut cmd = Command::new(format!("{RABBIT_BIN}/rabbitmq-server"));
        cmd.current_dir(&dir)
            .env("HOME", &dir)
            .env("ERL_EPMD_PORT", epmd_port.to_string())
            .env("RABBITMQ_NODENAME", format!("tls{port}@localhost"))
            .env("RABBITMQ_CONF_ENV_FILE", dir.join("rabbitmq-env.conf"))
            .env("RABBITMQ_NODE_PORT", port.to_string())
            .env("RABBITMQ_DIST_PORT", dist_port.to_string())
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_PID_FILE", dir.join("rabbitmq.pid"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.conf"))
            .env(
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS",
                "-kernel inet_dist_use_interface {127,0,0,1}",
            )
            // exec the VM in place of the script, so killing our child kills beam.
            .env("RUNNING_UNDER_SYSTEMD", "true");
        let mut process = OwnedProcess::spawn(
            &format!("rabbitmq tls :{port}"),
            cmd,
            &dir.join("rabbitmq.log"),
        );
        wait_ready(&mut process, RABBIT_START_LIMIT, || async move {
            port_open(port)
        })
        .await;
        Self {
            port,
            process: Some(process),
            _epmd: epmd,
        }
    }
}

impl Drop for TlsRabbit {
    fn drop(&mut self) {
        self.process.take();
    }
}

/// A directory removed (recursively) when dropped.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "stockd-tls-{tag}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
