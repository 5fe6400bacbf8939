//! A private mariadbd: its own datadir made by mariadb-install-db (root with an
//! empty password over TCP), a small buffer pool and redo log so it starts in
//! well under a second; kill -9 + restart on the same datadir (crash
//! recovery); freeze with SIGSTOP. Several can run side by side under one
//! scenario dir, each with its own name (datadir, socket, pid file, tmpdir,
//! log) and extra server options (a replication pair, `mariadb_replica.rs`);
//! each in a [`Place`] (bound to its address, reachable from partitioned
//! hosts); or TLS-only (`tests/it/tls.rs`, [`Mariadb::start_tls`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::process::{free_port, OwnedProcess};
use super::tls::ServerTls;
use super::wait_up;
use crate::place::Place;

/// install-db takes ~3 s on an idle machine; crash recovery well under 10 s.
const START_LIMIT: Duration = Duration::from_secs(60);
/// Any single query of the harness.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// Run at every start of a server bound to a non-loopback address: root
/// without a password from any address, as it is from localhost.
const REMOTE_ROOT_SQL: &str = "CREATE USER IF NOT EXISTS 'root'@'%';\n\
     GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;\n";
/// Small InnoDB sizes: the suite's data is a few thousand rows.
const SERVER_ARGS: [&str; 4] = [
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=8M",
    "--skip-name-resolve",
    "--max-connections=300",
];

pub struct Mariadb {
    pub port: u16,
    /// Names its datadir, socket, pid file, init file, tmpdir and log
    /// (`mariadb`, `replica`).
    name: String,
    /// Server options on top of [`SERVER_ARGS`] (replication settings).
    extra_args: Vec<String>,
    /// Where it runs and the address it binds (loopback unless partitioned).
    pub place: Place,
    /// TLS-only (`--require-secure-transport`): readiness is the open port,
    /// the plain `SELECT 1` probe would be refused.
    tls_only: bool,
    datadir: PathBuf,
    root: PathBuf,
    log: PathBuf,
    process: Option<OwnedProcess>,
}

impl Mariadb {
    /// The scenario's one server (`mariadb` under `root`) in `place`, bound
    /// to its address; off loopback root may also log in from any address
    /// (the partitioned hosts and the harness come from the namespaces'
    /// addresses, not from localhost).
    pub async fn start_at(root: &Path, place: Place) -> Self {
        Self::start_named(root, "mariadb", &[], place).await
    }

    /// A loopback server (`mariadb` under `root`) that refuses connections
    /// without TLS and shows `tls`'s certificate.
    pub async fn start_tls(root: &Path, tls: &ServerTls) -> Self {
        let path = |p: &Path| p.display().to_string();
        let args = [
            format!("--ssl-cert={}", path(&tls.cert)),
            format!("--ssl-key={}", path(&tls.key)),
            format!("--ssl-ca={}", path(&tls.ca)),
            "--require-secure-transport=ON".to_string(),
        ];
        Self::install_and_start(root, "mariadb", &args, Place::loopback(), true).await
    }

    /// A server called `name` under `root`, in `place`, started with
    /// `extra_args` too (a replication pair's primary and replica).
    pub async fn start_named(root: &Path, name: &str, extra_args: &[String], place: Place) -> Self {
        Self::install_and_start(root, name, extra_args, place, false).await
    }

    async fn install_and_start(
        root: &Path,
        name: &str,
        extra_args: &[String],
        place: Place,
        tls_only: bool,
    ) -> Self {
        let datadir = root.join(name);
        let log = root.join(format!("logs/{name}.log"));
        std::fs::create_dir_all(root.join("logs")).unwrap();
        let tmpdir = tmpdir_of(root, name);
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
            place,
            tls_only,
            datadir,
            root: root.to_path_buf(),
            log,
            process: None,
        };
        db.spawn().await;
        db
    }

    /// URL of database `name` on this server (root, empty password). Off
    /// loopback with `prefer_socket=false`: mysql_async otherwise asks the
    /// server for its unix socket after the TCP handshake and moves to it
    /// whenever the file is reachable — from any network namespace on this
    /// machine, past every DROP rule.
    pub fn url(&self, name: &str) -> String {
        let url = format!("mysql://root@{}:{}/{name}", self.place.ip, self.port);
        if self.place.ip.is_loopback() {
            url
        } else {
            format!("{url}?prefer_socket=false")
        }
    }

    /// `ip:port` of its place, what a proxy forwards to.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.place.ip, self.port)
    }

    async fn spawn(&mut self) {
        let mut cmd = self.place.command("/usr/sbin/mariadbd");
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.datadir.display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--bind-address={}", self.place.ip))
            .arg(format!(
                "--tmpdir={}",
                tmpdir_of(&self.root, &self.name).display()
            ));
        if !self.place.ip.is_loopback() {
            let init = self.root.join(format!("{}-init.sql", self.name));
            std::fs::write(&init, REMOTE_ROOT_SQL).unwrap();
            cmd.arg(format!("--init-file={}", init.display()));
        }
        let file = |suffix: &str| self.root.join(format!("{}.{suffix}", self.name));
        cmd.arg(format!("--socket={}", file("sock").display()))
            .arg(format!("--pid-file={}", file("pid").display()))
            .arg("--user=root")
            .args(SERVER_ARGS)
            .args(&self.extra_args);
        let name = format!("mariadbd :{}", self.port);
        let started = Instant::now();
        self.process = Some(OwnedProcess::spawn(&name, cmd, &self.log));
        let url = self.url("mysql");
        // The plain `SELECT 1` probe is refused by a TLS-only server.
        let tls_port = self.tls_only.then_some((self.place.ip, self.port));
        let probe = || select_one(url.clone());
        wait_up(&name, START_LIMIT, tls_port, probe, (&self.log, 30)).await;
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

/// The server's own temp dir (internal temporary tables), `<name>-tmp` under
/// the scenario dir: in the shared /tmp, a bootstrap once failed with `Error on
/// delete of '/tmp/#sql-temptable-….MAI' (Errcode: 2)` — something else had
/// removed it.
fn tmpdir_of(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(format!("{name}-tmp"));
    std::fs::create_dir_all(&dir).expect("mariadb tmpdir");
    dir
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
