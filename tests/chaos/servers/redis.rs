//! A private redis-server: AOF with fsync on every write, so a kill -9 loses
//! nothing it acknowledged; restart empty; restore from an older snapshot
//! (a failover to a replica that lost acknowledged writes); freeze; maxmemory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use deadpool_redis::redis;

use super::process::{free_port, OwnedProcess};
use super::wait_ready;
use crate::net::Place;

/// A fresh or AOF-replaying redis-server answers PING well within this.
const START_LIMIT: Duration = Duration::from_secs(30);
/// Any single command of the harness; a frozen server must not hang the test.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

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
}

impl Redis {
    /// Starts redis-server in `place` (loopback, or a network namespace),
    /// bound to its address.
    pub async fn start_at(root: &Path, place: Place) -> Self {
        let dir = root.join("redis");
        let snapshots = root.join("redis-snapshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&snapshots).unwrap();
        let mut redis = Self {
            port: free_port(),
            place,
            dir,
            snapshots,
            log: root.join("logs/redis.log"),
            process: None,
            starts: 0,
        };
        redis.spawn(true).await;
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://{}:{}", self.place.ip, self.port)
    }

    async fn spawn(&mut self, appendonly: bool) {
        self.starts += 1;
        let mut cmd = self.place.command("redis-server");
        let bind = self.place.ip.to_string();
        cmd.args(["--port", &self.port.to_string(), "--bind", &bind])
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
        let name = format!("redis-server :{}", self.port);
        let started = Instant::now();
        self.process = Some(OwnedProcess::spawn(&name, cmd, &self.log));
        let url = self.url();
        let log = self.log.clone();
        wait_ready(
            &name,
            START_LIMIT,
            || ping(url.clone()),
            || super::process::log_tail(&log, 30),
        )
        .await;
        println!(
            "  redis-server :{} up in {} ms (appendonly {appendonly})",
            self.port,
            started.elapsed().as_millis()
        );
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
        self.spawn(true).await;
    }

    /// kill -9, delete every file of the data dir, start again: Redis lost it all.
    pub async fn restart_empty(&mut self) {
        self.kill9();
        std::fs::remove_dir_all(&self.dir).unwrap();
        std::fs::create_dir_all(&self.dir).unwrap();
        self.spawn(true).await;
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
