//! A private redis-server. The chaos suite's ([`Redis::start_at`]) keeps an
//! AOF with fsync on every write, so a kill -9 loses nothing it acknowledged;
//! restart empty; restore from an older snapshot (a failover to a replica that
//! lost acknowledged writes); freeze; maxmemory. `tests/it` starts one without
//! persistence ([`Redis::start_with`]): plain, or TLS-only.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use deadpool_redis::redis;

use super::process::{free_port, OwnedProcess};
use super::tls::ServerTls;
use super::wait_up;
use crate::place::Place;

/// A fresh or AOF-replaying redis-server answers PING well within this.
const START_LIMIT: Duration = Duration::from_secs(30);
/// Any single command of the harness; a frozen server must not hang the test.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// How a private redis-server runs.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Where it runs and the address it binds.
    pub place: Place,
    /// AOF with `appendfsync always` (the chaos suite's kill -9 loses nothing
    /// acknowledged); without it, no persistence at all.
    pub durable: bool,
    /// TLS-only: no plain port, clients must show a certificate.
    pub tls: Option<ServerTls>,
}

impl RedisOptions {
    /// On loopback, no persistence, plain TCP: a test's own server.
    pub fn plain() -> Self {
        Self {
            place: Place::loopback(),
            durable: false,
            tls: None,
        }
    }
}

pub struct Redis {
    pub port: u16,
    /// Where it runs and the address it binds (loopback unless partitioned).
    pub place: Place,
    /// Data directory (AOF, dump.rdb).
    dir: PathBuf,
    /// Where snapshots are copied to.
    snapshots: PathBuf,
    log: PathBuf,
    process: Option<OwnedProcess>,
    /// Restarts count, for log file names.
    starts: u32,
    /// AOF on every (re)start but a [`Self::restore`].
    durable: bool,
    tls: Option<ServerTls>,
}

impl Redis {
    /// Starts redis-server in `place` (loopback, or a network namespace),
    /// bound to its address.
    pub async fn start_at(root: &Path, place: Place) -> Self {
        let options = RedisOptions {
            place,
            durable: true,
            tls: None,
        };
        Self::start_with(root, options).await
    }

    /// A loopback server without persistence whose only port is TLS,
    /// showing `tls`'s certificate; clients must show one too.
    pub async fn start_tls(root: &Path, tls: &ServerTls) -> Self {
        let options = RedisOptions {
            tls: Some(tls.clone()),
            ..RedisOptions::plain()
        };
        Self::start_with(root, options).await
    }

    /// Starts redis-server as `options` say, its files under `root`.
    pub async fn start_with(root: &Path, options: RedisOptions) -> Self {
        let dir = root.join("redis");
        let snapshots = root.join("redis-snapshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&snapshots).unwrap();
        let mut redis = Self {
            port: free_port(),
            place: options.place,
            dir,
            snapshots,
            log: root.join("logs/redis.log"),
            process: None,
            starts: 0,
            durable: options.durable,
            tls: options.tls,
        };
        redis.spawn(redis.durable).await;
        redis
    }

    /// `redis://` (`rediss://` when TLS-only) of its place and port.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://{}:{}", self.place.ip, self.port)
    }

    async fn spawn(&mut self, appendonly: bool) {
        self.starts += 1;
        let cmd = self.command(appendonly);
        let name = format!("redis-server :{}", self.port);
        let started = Instant::now();
        self.process = Some(OwnedProcess::spawn(&name, cmd, &self.log));
        let url = self.url();
        // A TLS-only server would need a TLS client to PING.
        let tls_port = self.tls.as_ref().map(|_| (self.place.ip, self.port));
        let probe = || ping(url.clone());
        wait_up(&name, START_LIMIT, tls_port, probe, (&self.log, 30)).await;
        println!(
            "  redis-server :{} up in {} ms (appendonly {appendonly})",
            self.port,
            started.elapsed().as_millis()
        );
    }

    /// The redis-server command line: its port (or TLS port), address, data
    /// dir and persistence.
    fn command(&self, appendonly: bool) -> std::process::Command {
        let mut cmd = self.place.command("redis-server");
        let bind = self.place.ip.to_string();
        let port = self.port.to_string();
        match &self.tls {
            None => cmd.args(["--port", &port]),
            Some(tls) => cmd
                .args(["--port", "0", "--tls-port", &port])
                .arg("--tls-cert-file")
                .arg(&tls.cert)
                .arg("--tls-key-file")
                .arg(&tls.key)
                .arg("--tls-ca-cert-file")
                .arg(&tls.ca)
                .args(["--tls-auth-clients", "yes"]),
        };
        cmd.args(["--bind", &bind])
            // Clients come from other namespaces' addresses, not loopback.
            .args(["--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--save", "", "--maxmemory-policy", "noeviction"]);
        if appendonly {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        cmd
    }

    pub fn process(&mut self) -> &mut OwnedProcess {
        self.process.as_mut().expect("redis-server running")
    }

    /// kill -9; the data dir stays.
    pub fn kill9(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill9();
        }
    }

    /// Start again on the same data dir (replays the AOF).
    pub async fn restart(&mut self) {
        assert!(self.process.is_none(), "redis-server still running");
        self.spawn(self.durable).await;
    }

    /// kill -9, delete every file of the data dir, start again: Redis lost it all.
    pub async fn restart_empty(&mut self) {
        self.kill9();
        std::fs::remove_dir_all(&self.dir).unwrap();
        std::fs::create_dir_all(&self.dir).unwrap();
        self.spawn(self.durable).await;
    }

    /// `SAVE`, then copies dump.rdb aside as snapshot `name`.
    pub async fn snapshot(&self, name: &str) -> PathBuf {
        let mut conn = self.conn().await;
        let _: () = timed(redis::cmd("SAVE").query_async(&mut conn)).await;
        let copy = self.snapshots.join(format!("{name}.rdb"));
        std::fs::copy(self.dir.join("dump.rdb"), &copy).expect("copy dump.rdb");
        copy
    }

    /// kill -9, then start from `snapshot` alone (no AOF): every write acknowledged
    /// after the snapshot is gone, as after a failover to a lagging replica.
    pub async fn restore(&mut self, snapshot: &Path) {
        self.kill9();
        std::fs::remove_dir_all(&self.dir).unwrap();
        std::fs::create_dir_all(&self.dir).unwrap();
        std::fs::copy(snapshot, self.dir.join("dump.rdb")).expect("copy snapshot");
        self.spawn(false).await;
    }

    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.url()).unwrap();
        tokio::time::timeout(COMMAND_TIMEOUT, client.get_multiplexed_async_connection())
            .await
            .unwrap_or_else(|_| panic!("connecting to redis :{} timed out", self.port))
            .unwrap_or_else(|e| panic!("connecting to redis :{}: {e}", self.port))
    }

    /// `INFO memory` used_memory in bytes.
    pub async fn used_memory(&self) -> u64 {
        let mut conn = self.conn().await;
        let info: String = timed(redis::cmd("INFO").arg("memory").query_async(&mut conn)).await;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("used_memory in INFO")
    }

    /// `CONFIG SET maxmemory` (0 = no limit).
    pub async fn set_maxmemory(&self, bytes: u64) {
        let mut conn = self.conn().await;
        let _: () = timed(
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("maxmemory")
                .arg(bytes)
                .query_async(&mut conn),
        )
        .await;
    }
}

async fn ping(url: String) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let attempt = async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), attempt).await,
        Ok(Some(_))
    )
}

/// Runs one harness command with [`COMMAND_TIMEOUT`]; panics on error.
pub async fn timed<T>(fut: impl std::future::Future<Output = redis::RedisResult<T>>) -> T {
    tokio::time::timeout(COMMAND_TIMEOUT, fut)
        .await
        .expect("redis command timed out")
        .expect("redis command failed")
}
