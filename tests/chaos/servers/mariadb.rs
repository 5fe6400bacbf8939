//! A private mariadbd: its own datadir made by mariadb-install-db (root with an
//! empty password over TCP), a small buffer pool and redo log so it starts in
//! well under a second; kill -9 + restart on the same datadir (crash
//! recovery); freeze with SIGSTOP. Several can run side by side under one
//! scenario dir, each with its own name (datadir, socket, pid file, log) and
//! extra server options (a replication pair, `mariadb_replica.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::process::{free_port, log_tail, OwnedProcess};
use super::wait_ready;

/// install-db takes ~3 s on an idle machine; crash recovery well under 10 s.
const START_LIMIT: Duration = Duration::from_secs(60);
/// Any single query of the harness.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Small InnoDB sizes: the suite's data is a few thousand rows.
const SERVER_ARGS: [&str; 4] = [
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=8M",
    "--skip-name-resolve",
    "--max-connections=300",
];

pub struct Mariadb {
    pub port: u16,
    /// Names its datadir, socket, pid file and log (`mariadb`, `replica`).
    name: String,
    /// Server options on top of [`SERVER_ARGS`] (replication settings).
    extra_args: Vec<String>,
    datadir: PathBuf,
    root: PathBuf,
    log: PathBuf,
    process: Option<OwnedProcess>,
}

impl Mariadb {
    /// The scenario's one server (`mariadb` under `root`).
    pub async fn start(root: &Path) -> Self {
        Self::start_named(root, "mariadb", &[]).await
    }

    /// A server called `name` under `root`, started with `extra_args` too.
    pub async fn start_named(root: &Path, name: &str, extra_args: &[String]) -> Self {
        let datadir = root.join(name);
        let log = root.join(format!("logs/{name}.log"));
        // Its own tmpdir: the default is /tmp, shared with every other
        // process on the machine (an install-db running beside another one
        // failed once: "Could not remove temporary table '/tmp/#sql-temptable-…'").
        let tmpdir = tmp_dir(root, name);
        std::fs::create_dir_all(&tmpdir).unwrap();
        std::fs::create_dir_all(root.join("logs")).unwrap();
        let install = Command::new("mariadb-install-db")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .arg(format!("--tmpdir={}", tmpdir.display()))
            .args([
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--user=root",
            ])
            .args(&SERVER_ARGS[..2])
            .output()
            .expect("mariadb-install-db on PATH");
        assert!(
            install.status.success(),
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&install.stdout),
            String::from_utf8_lossy(&install.stderr)
        );
        let mut db = Self {
            port: free_port(),
            name: name.to_string(),
            extra_args: extra_args.to_vec(),
            datadir,
            root: root.to_path_buf(),
            log,
            process: None,
        };
        db.spawn().await;
        db
    }

    /// URL of database `name` on this server (root, empty password).
    pub fn url(&self, name: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{name}", self.port)
    }

    /// `127.0.0.1:port`, what a proxy forwards to.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    async fn spawn(&mut self) {
        let mut cmd = Command::new("/usr/sbin/mariadbd");
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.datadir.display()))
            .arg(format!(
                "--tmpdir={}",
                tmp_dir(&self.root, &self.name).display()
            ))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!(
                "--socket={}",
                self.root.join(format!("{}.sock", self.name)).display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.root.join(format!("{}.pid", self.name)).display()
            ))
            .arg("--user=root")
            .args(SERVER_ARGS)
            .args(&self.extra_args);
        let name = format!("mariadbd :{}", self.port);
        let started = Instant::now();
        self.process = Some(OwnedProcess::spawn(&name, cmd, &self.log));
        let url = self.url("mysql");
        let log = self.log.clone();
        wait_ready(
            &name,
            START_LIMIT,
            || select_one(url.clone()),
            || log_tail(&log, 30),
        )
        .await;
        println!(
            "  mariadbd :{} up in {} ms",
            self.port,
            started.elapsed().as_millis()
        );
    }

    pub fn process(&mut self) -> &mut OwnedProcess {
        self.process.as_mut().expect("mariadbd running")
    }

    pub fn kill9(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill9();
        }
    }

    /// Start again on the same datadir (InnoDB crash recovery).
    pub async fn restart(&mut self) {
        assert!(self.process.is_none(), "mariadbd still running");
        self.spawn().await;
    }

    /// A connection to database `name`.
    pub async fn conn(&self, name: &str) -> mysql_async::Conn {
        let opts = mysql_async::Opts::from_url(&self.url(name)).unwrap();
        tokio::time::timeout(QUERY_TIMEOUT, mysql_async::Conn::new(opts))
            .await
            .unwrap_or_else(|_| panic!("connecting to mariadbd :{} timed out", self.port))
            .unwrap_or_else(|e| panic!("connecting to mariadbd :{}: {e}", self.port))
    }
}

/// The server's own temporary directory under the scenario dir.
fn tmp_dir(root: &Path, name: &str) -> PathBuf {
    root.join(format!("{name}-tmp"))
}

async fn select_one(url: String) -> bool {
    let attempt = async {
        let opts = mysql_async::Opts::from_url(&url).ok()?;
        let mut conn = mysql_async::Conn::new(opts).await.ok()?;
        let one: Option<u8> = conn.query_first("SELECT 1").await.ok()?;
        let _ = conn.disconnect().await;
        one
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), attempt).await,
        Ok(Some(1))
    )
}

/// Runs one harness query with [`QUERY_TIMEOUT`]; panics on error.
pub async fn timed<T>(fut: impl std::future::Future<Output = mysql_async::Result<T>>) -> T {
    tokio::time::timeout(QUERY_TIMEOUT, fut)
        .await
        .expect("mysql query timed out")
        .expect("mysql query failed")
}
