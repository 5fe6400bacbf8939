//! A private RabbitMQ node: its own epmd (so the host's epmd and broker are not
//! involved), node name, AMQP and distribution ports, Erlang cookie (HOME),
//! mnesia and logs under the scenario dir, no plugins (no management listener).
//! kill -9 and restart on the same mnesia dir; SIGSTOP freeze; memory alarm.
//! Or TLS-only on loopback (`tests/it/tls.rs`, [`Rabbit::start_tls`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;

use super::process::{free_port, OwnedProcess};
use super::tls::ServerTls;
use super::wait_up;
use crate::place::Place;

/// A fresh node boots in 5–15 s on a busy 2-core machine; a restart replays
/// quorum queue logs.
const START_LIMIT: Duration = Duration::from_secs(120);
/// rabbitmqctl calls are Erlang VMs of their own: slow, but bounded.
pub(super) const CTL_TIMEOUT_SECS: u32 = 60;
/// Bin dir of the broker scripts: the /usr/sbin wrappers `su` to the rabbitmq
/// user, which loses our environment and cannot write our dirs.
pub(super) const RABBIT_BIN: &str = "/usr/lib/rabbitmq/bin";

pub struct Rabbit {
    pub node: String,
    pub port: u16,
    /// Address of the AMQP listener (epmd and distribution stay on loopback).
    pub ip: std::net::Ipv4Addr,
    /// TLS-only listener: `amqps://`, readiness is the open port.
    tls_only: bool,
    dist_port: u16,
    epmd_port: u16,
    dir: PathBuf,
    log: PathBuf,
    epmd: OwnedProcess,
    process: Option<OwnedProcess>,
}

impl Rabbit {
    /// Starts a node with its AMQP listener on `place`'s address (loopback for
    /// every scenario before s19); the node runs in the root namespace (its
    /// epmd and rabbitmqctl stay there).
    pub async fn start_at(root: &Path, place: &Place) -> Self {
        assert!(place.ns.is_none(), "RabbitMQ runs in the root namespace");
        let port = free_port();
        let conf = listener_conf(place.ip, port);
        Self::start_conf(root, place.ip, port, conf, false).await
    }

    /// A loopback node whose only listener is TLS, showing `tls`'s
    /// certificate; clients must show one too.
    pub async fn start_tls(root: &Path, tls: &ServerTls) -> Self {
        let port = free_port();
        let conf = format!(
            "listeners.tcp = none\n\
             listeners.ssl.default = 127.0.0.1:{port}\n\
             ssl_options.cacertfile = {}\n\
             ssl_options.certfile = {}\n\
             ssl_options.keyfile = {}\n\
             ssl_options.verify = verify_peer\n\
             ssl_options.fail_if_no_peer_cert = true\n",
            tls.ca.display(),
            tls.cert.display(),
            tls.key.display()
        );
        Self::start_conf(root, std::net::Ipv4Addr::LOCALHOST, port, conf, true).await
    }

    /// Writes the node's files (`conf` as its rabbitmq.conf), starts its
    /// epmd and the node, and waits until its listener on `ip:port` answers.
    async fn start_conf(
        root: &Path,
        ip: std::net::Ipv4Addr,
        port: u16,
        conf: String,
        tls_only: bool,
    ) -> Self {
        let dir = root.join("rabbitmq");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        std::fs::write(dir.join("rabbitmq-env.conf"), "").unwrap();
        std::fs::write(dir.join("rabbitmq.conf"), conf).unwrap();
        let (epmd_port, epmd) = start_epmd(&root.join("logs/epmd.log"));
        let mut rabbit = Self {
            node: format!("chaos{port}@localhost"),
            port,
            ip,
            tls_only,
            dist_port: free_port(),
            epmd_port,
            dir,
            log: root.join("logs/rabbitmq.log"),
            epmd,
            process: None,
        };
        rabbit.spawn().await;
        rabbit
    }

    pub fn url(&self) -> String {
        let scheme = if self.tls_only { "amqps" } else { "amqp" };
        format!("{scheme}://guest:guest@{}:{}/%2f", self.ip, self.port)
    }

    async fn spawn(&mut self) {
        let d = self.dir.clone();
        let mut cmd = Command::new(format!("{RABBIT_BIN}/rabbitmq-server"));
        self.ctl_handle().env(&mut cmd);
        node_env(&mut cmd, &d, self.port, self.dist_port);
        let name = format!("rabbitmq {} :{}", self.node, self.port);
        let started = Instant::now();
        self.process = Some(OwnedProcess::spawn(&name, cmd, &self.log));
        let url = self.url();
        // A TLS-only listener would need the client's certificate to talk AMQP.
        let tls_port = self.tls_only.then_some((self.ip, self.port));
        let probe = || amqp_handshake(url.clone());
        wait_up(&name, START_LIMIT, tls_port, probe, (&self.log, 40)).await;
        println!(
            "  rabbitmq {} :{} up in {} ms",
            self.node,
            self.port,
            started.elapsed().as_millis()
        );
    }

    pub fn process(&mut self) -> &mut OwnedProcess {
        self.process.as_mut().expect("rabbitmq running")
    }

    pub fn kill9(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill9();
        }
    }

    /// Start again on the same mnesia dir (quorum queues recover their logs).
    pub async fn restart(&mut self) {
        assert!(self.process.is_none(), "rabbitmq still running");
        self.spawn().await;
    }

    fn ctl_handle(&self) -> CtlHandle {
        CtlHandle {
            node: self.node.clone(),
            dir: self.dir.clone(),
            epmd_port: self.epmd_port,
        }
    }

    /// Memory alarm on (every publisher blocked) or back to the default.
    pub async fn memory_alarm(&self, on: bool) {
        let watermark = if on { "0.000001" } else { "0.4" };
        let ctl = self.ctl_handle();
        tokio::task::spawn_blocking(move || ctl.run(&["set_vm_memory_high_watermark", watermark]))
            .await
            .unwrap();
    }

    /// (name, messages, ready, unacked) of every queue, from rabbitmqctl.
    pub async fn list_queues(&self) -> Vec<(String, u64, u64, u64)> {
        let ctl = self.ctl_handle();
        let out = tokio::task::spawn_blocking(move || {
            ctl.run(&[
                "list_queues",
                "-q",
                "--no-table-headers",
                "name",
                "messages",
                "messages_ready",
                "messages_unacknowledged",
            ])
        })
        .await
        .unwrap();
        out.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let n = |i: usize| f.get(i).and_then(|v| v.parse().ok());
                Some((f.first()?.to_string(), n(1)?, n(2)?, n(3)?))
            })
            .collect()
    }

    /// Ready messages of `queue` (AMQP passive declare), None if unreachable.
    pub async fn ready(&self, queue: &str) -> Option<u32> {
        passive_count(&self.url(), queue).await
    }
}

/// The environment of a node whose files are in `dir`: its AMQP and
/// distribution ports, mnesia, logs, pid file, plugins and config, and
/// distribution on loopback only. One node or each node of a cluster.
pub(super) fn node_env(cmd: &mut Command, dir: &Path, port: u16, dist_port: u16) {
    cmd.env("RABBITMQ_NODE_PORT", port.to_string())
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
        // exec the VM in place of the script: our child *is* beam.smp, so
        // kill -9 and wait() leave no orphaned VM behind.
        .env("RUNNING_UNDER_SYSTEMD", "true");
}

/// rabbitmq.conf: the AMQP listener; off loopback, `guest` may log in from
/// any address (by default only from loopback).
fn listener_conf(ip: std::net::Ipv4Addr, port: u16) -> String {
    let mut conf = format!("listeners.tcp.local = {ip}:{port}\n");
    if !ip.is_loopback() {
        conf.push_str("loopback_users = none\n");
    }
    conf
}

/// An epmd of our own on a free loopback port (the system node's stays
/// untouched), logging to `log`: its port and process.
pub(super) fn start_epmd(log: &Path) -> (u16, OwnedProcess) {
    let port = free_port();
    let mut cmd = Command::new("epmd");
    cmd.args(["-port", &port.to_string(), "-address", "127.0.0.1"]);
    (
        port,
        OwnedProcess::spawn(&format!("epmd :{port}"), cmd, log),
    )
}

/// Ready messages of `queue` on the broker at `url` (AMQP passive declare),
/// None if unreachable or missing. For one node and for each node of a cluster.
pub(super) async fn passive_count(url: &str, queue: &str) -> Option<u32> {
    let probe = async {
        let conn = stockd::mq::connect(url, "chaos-probe").await.ok()?;
        let ch = conn.create_channel().await.ok()?;
        let options = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let declared = ch
            .queue_declare(queue.into(), options, FieldTable::default())
            .await;
        let _ = conn.close(200, "".into()).await;
        declared.ok().map(|q| q.message_count())
    };
    tokio::time::timeout(Duration::from_secs(10), probe)
        .await
        .ok()
        .flatten()
}

impl Drop for Rabbit {
    fn drop(&mut self) {
        // The node first, its epmd last (fields would drop epmd first).
        self.kill9();
        self.epmd.kill9();
    }
}

/// The parts of [`Rabbit`] rabbitmqctl needs, movable into a blocking task.
struct CtlHandle {
    node: String,
    dir: PathBuf,
    epmd_port: u16,
}

impl CtlHandle {
    /// Environment shared by the server and rabbitmqctl: same node name,
    /// cookie (HOME) and epmd.
    fn env(&self, cmd: &mut Command) {
        let d = &self.dir;
        cmd.current_dir(d)
            .env("HOME", d)
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_CONF_ENV_FILE", d.join("rabbitmq-env.conf"));
    }

    fn run(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("timeout");
        cmd.args(["-s", "KILL", &CTL_TIMEOUT_SECS.to_string()])
            .arg(format!("{RABBIT_BIN}/rabbitmqctl"))
            .args(["-n", &self.node])
            .args(args);
        self.env(&mut cmd);
        let out = cmd.output().expect("rabbitmqctl");
        assert!(
            out.status.success(),
            "rabbitmqctl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

pub(super) async fn amqp_handshake(url: String) -> bool {
    match stockd::mq::connect(&url, "chaos-ready").await {
        Ok(conn) => {
            let _ = conn.close(200, "".into()).await;
            true
        }
        Err(_) => false,
    }
}
