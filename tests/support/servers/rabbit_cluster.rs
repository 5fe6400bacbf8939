//! A private 3-node RabbitMQ cluster: one epmd of its own (`ERL_EPMD_PORT`),
//! one Erlang cookie (`HOME` of every node and of rabbitmqctl is the cluster
//! dir), and per node a name `chaos<port>@localhost`, free AMQP and
//! distribution ports, config, mnesia and logs under the scenario dir, no
//! plugins. The nodes boot in parallel; the second and third then join the
//! first (`stop_app`, `join_cluster`, `start_app`, as
//! scripts/services-cluster.sh does). kill -9 of one node and restart on its
//! mnesia dir (it rejoins by itself); queue layout (leader, members, online)
//! from any running node. Every process is stopped by pid when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::process::{free_port, log_tail, OwnedProcess};
use super::rabbitmq::{amqp_handshake, node_env, CTL_TIMEOUT_SECS, RABBIT_BIN};
use super::wait_ready;

/// Nodes of the cluster.
pub const NODES: usize = 3;
/// Three fresh nodes booting at once on a busy 2-core machine: 10–20 s each.
const START_LIMIT: Duration = Duration::from_secs(150);

/// One member: its ports and dirs, and the VM while it runs.
pub struct RabbitNode {
    pub node: String,
    pub port: u16,
    dist_port: u16,
    dir: PathBuf,
    log: PathBuf,
    process: Option<OwnedProcess>,
}

impl RabbitNode {
    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.port)
    }

    pub fn running(&self) -> bool {
        self.process.is_some()
    }
}

/// One quorum queue as a running node sees it.
#[derive(Debug, Clone, Default)]
pub struct QueueView {
    pub name: String,
    pub messages: u64,
    pub ready: u64,
    pub unacked: u64,
    pub leader: String,
    pub members: Vec<String>,
    pub online: Vec<String>,
}

pub struct RabbitCluster {
    pub nodes: Vec<RabbitNode>,
    /// HOME of every node and rabbitmqctl: holds the shared `.erlang.cookie`.
    home: PathBuf,
    epmd_port: u16,
    epmd: OwnedProcess,
}

impl RabbitCluster {
    /// Boots the three nodes in parallel, joins the 2nd and 3rd to the 1st,
    /// and waits until the first sees all three running.
    pub async fn start(root: &Path) -> Self {
        let started = Instant::now();
        let home = root.join("rabbit-cluster");
        std::fs::create_dir_all(&home).unwrap();
        write_cookie(&home);
        std::fs::write(home.join("rabbitmq-env.conf"), "").unwrap();
        let (epmd_port, epmd) = super::rabbitmq::start_epmd(&root.join("logs/epmd-cluster.log"));
        let nodes = node_dirs(root, &home, epmd_port);
        let mut cluster = Self {
            nodes,
            home,
            epmd_port,
            epmd,
        };
        for i in 0..NODES {
            cluster.spawn(i);
        }
        let waits: Vec<_> = (0..NODES).map(|i| cluster.wait_booted(i)).collect();
        futures_util::future::join_all(waits).await;
        println!(
            "  rabbitmq cluster: {NODES} nodes booted in {} ms; joining",
            started.elapsed().as_millis()
        );
        cluster.join_first().await;
        cluster.wait_all_running().await;
        for i in 0..NODES {
            cluster.wait_booted(i).await;
        }
        println!(
            "  rabbitmq cluster up in {} ms: {}",
            started.elapsed().as_millis(),
            cluster
                .nodes
                .iter()
                .map(|n| format!("{} :{}", n.node, n.port))
                .collect::<Vec<_>>()
                .join(", ")
        );
        cluster
    }

    /// Joins the 2nd and 3rd node to the 1st. One node at a time, as
    /// scripts/services-cluster.sh does: two nodes joining the same seed at
    /// once can race in Mnesia's schema change, and `start_app` then fails
    /// (seen once in a clean-clone CI run:
    /// `{badmatch,{error,{normal,{mnesia_app,start,...}}}}`).
    async fn join_first(&self) {
        let seed = self.nodes[0].node.clone();
        let ctls: Vec<_> = (1..NODES).map(|i| self.ctl(i)).collect();
        tokio::task::spawn_blocking(move || {
            for ctl in ctls {
                ctl.run(&["stop_app"]);
                // join_cluster resets the (fresh) node itself.
                ctl.run(&["join_cluster", &seed]);
                ctl.run(&["start_app"]);
            }
        })
        .await
        .expect("join_cluster task");
    }

    /// `amqp.urls`: every node, the first one first (comma-separated).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(RabbitNode::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Index of the node called `name` (`chaos…@localhost`).
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.node == name)
    }

    fn spawn(&mut self, i: usize) {
        let ctl = self.ctl(i);
        let n = &mut self.nodes[i];
        let d = n.dir.clone();
        let mut cmd = Command::new(format!("{RABBIT_BIN}/rabbitmq-server"));
        ctl.env(&mut cmd);
        cmd.current_dir(&d)
            .env("RABBITMQ_NODENAME", &n.node)
            .env("ERL_CRASH_DUMP", d.join("erl_crash.dump"));
        node_env(&mut cmd, &d, n.port, n.dist_port);
        let name = format!("rabbitmq {} :{}", n.node, n.port);
        n.process = Some(OwnedProcess::spawn(&name, cmd, &n.log));
    }

    /// Waits until node `i` answers the AMQP handshake.
    async fn wait_booted(&self, i: usize) {
        let n = &self.nodes[i];
        let started = Instant::now();
        let url = n.url();
        let log = n.log.clone();
        wait_ready(
            &format!("rabbitmq {} :{}", n.node, n.port),
            START_LIMIT,
            || amqp_handshake(url.clone()),
            || log_tail(&log, 40),
        )
        .await;
        if started.elapsed() > Duration::from_millis(500) {
            println!(
                "  rabbitmq {} :{} up in {} ms",
                n.node,
                n.port,
                started.elapsed().as_millis()
            );
        }
    }

    /// Waits until a running node lists every node as running.
    pub async fn wait_all_running(&self) {
        let started = Instant::now();
        loop {
            let running = self.running_nodes().await;
            if running.len() == NODES {
                return;
            }
            assert!(
                started.elapsed() < START_LIMIT,
                "rabbitmq cluster: running nodes {running:?} after {:?}\n{}",
                started.elapsed(),
                self.log_tails()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// `running_nodes` of `cluster_status`, asked of the first running node.
    pub async fn running_nodes(&self) -> Vec<String> {
        let Some(i) = self.first_running() else {
            return Vec::new();
        };
        let ctl = self.ctl(i);
        let out = tokio::task::spawn_blocking(move || {
            ctl.try_run(&["cluster_status", "-q", "--formatter", "json"])
        })
        .await
        .unwrap();
        let Ok(text) = out else {
            return Vec::new();
        };
        serde_json::from_str::<Value>(text.trim())
            .ok()
            .and_then(|v| {
                v["running_nodes"].as_array().map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    fn first_running(&self) -> Option<usize> {
        self.nodes.iter().position(RabbitNode::running)
    }

    /// kill -9 of node `i` (its process group).
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut p) = self.nodes[i].process.take() {
            p.kill9();
        }
    }

    /// Starts node `i` again on its mnesia dir: it rejoins the cluster and its
    /// quorum queue members catch up. Waits until all nodes run again.
    pub async fn restart(&mut self, i: usize) {
        assert!(!self.nodes[i].running(), "node {i} still running");
        let started = Instant::now();
        self.spawn(i);
        self.wait_booted(i).await;
        self.wait_all_running().await;
        println!(
            "  rabbitmq {} back in the cluster after {} ms",
            self.nodes[i].node,
            started.elapsed().as_millis()
        );
    }

    /// Every queue as the first running node sees it (quorum queues: leader,
    /// members and online members). Empty when rabbitmqctl failed.
    pub async fn queues(&self) -> Vec<QueueView> {
        let Some(i) = self.first_running() else {
            return Vec::new();
        };
        let ctl = self.ctl(i);
        let out = tokio::task::spawn_blocking(move || {
            ctl.try_run(&[
                "list_queues",
                "-q",
                "--formatter",
                "json",
                "name",
                "messages",
                "messages_ready",
                "messages_unacknowledged",
                "leader",
                "members",
                "online",
            ])
        })
        .await
        .unwrap();
        let text = match out {
            Ok(text) => text,
            Err(err) => {
                println!("  rabbitmqctl list_queues failed: {err}");
                return Vec::new();
            }
        };
        let Ok(Value::Array(rows)) = serde_json::from_str::<Value>(text.trim()) else {
            println!("  rabbitmqctl list_queues: unparsable output: {text}");
            return Vec::new();
        };
        let names = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        rows.iter()
            .map(|r| QueueView {
                name: r["name"].as_str().unwrap_or_default().to_string(),
                messages: r["messages"].as_u64().unwrap_or(0),
                ready: r["messages_ready"].as_u64().unwrap_or(0),
                unacked: r["messages_unacknowledged"].as_u64().unwrap_or(0),
                leader: r["leader"].as_str().unwrap_or_default().to_string(),
                members: names(&r["members"]),
                online: names(&r["online"]),
            })
            .collect()
    }

    /// (name, messages, ready, unacked) of every queue, as [`super::rabbitmq::Rabbit::list_queues`].
    pub async fn list_queues(&self) -> Vec<(String, u64, u64, u64)> {
        self.queues()
            .await
            .into_iter()
            .map(|q| (q.name, q.messages, q.ready, q.unacked))
            .collect()
    }

    /// Ready messages of `queue` (AMQP passive declare on the first running
    /// node that answers), None if none does.
    pub async fn ready(&self, queue: &str) -> Option<u32> {
        for n in self.nodes.iter().filter(|n| n.running()) {
            if let Some(count) = super::rabbitmq::passive_count(&n.url(), queue).await {
                return Some(count);
            }
        }
        None
    }

    fn ctl(&self, i: usize) -> ClusterCtl {
        ClusterCtl {
            node: self.nodes[i].node.clone(),
            home: self.home.clone(),
            epmd_port: self.epmd_port,
        }
    }

    pub fn log_tails(&self) -> String {
        self.nodes.iter().map(|n| log_tail(&n.log, 25)).collect()
    }
}

impl Drop for RabbitCluster {
    fn drop(&mut self) {
        // The nodes first, their epmd last.
        for i in 0..self.nodes.len() {
            self.kill9(i);
        }
        self.epmd.kill9();
    }
}

/// A cookie of our own, readable by its owner only (Erlang refuses others).
fn write_cookie(home: &Path) {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::PermissionsExt;
    let mut cookie = String::new();
    for salt in 0..3u8 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::time::SystemTime::now().hash(&mut h);
        std::process::id().hash(&mut h);
        home.hash(&mut h);
        salt.hash(&mut h);
        cookie.push_str(&format!("{:016X}", h.finish()));
    }
    let path = home.join(".erlang.cookie");
    std::fs::write(&path, cookie).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
}

/// What rabbitmqctl needs to reach one node, movable into a blocking task.
struct ClusterCtl {
    node: String,
    home: PathBuf,
    epmd_port: u16,
}

impl ClusterCtl {
    /// Environment shared by the nodes and rabbitmqctl: cookie (HOME), epmd,
    /// no /etc/rabbitmq/rabbitmq-env.conf.
    fn env(&self, cmd: &mut Command) {
        cmd.current_dir(&self.home)
            .env("HOME", &self.home)
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env(
                "RABBITMQ_CONF_ENV_FILE",
                self.home.join("rabbitmq-env.conf"),
            );
    }

    fn try_run(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new("timeout");
        cmd.args(["-s", "KILL", &CTL_TIMEOUT_SECS.to_string()])
            .arg(format!("{RABBIT_BIN}/rabbitmqctl"))
            .args(["-n", &self.node])
            .args(args);
        self.env(&mut cmd);
        let out = cmd.output().map_err(|e| format!("rabbitmqctl: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "rabbitmqctl -n {} {args:?} failed ({}): {}{}",
                self.node,
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    fn run(&self, args: &[&str]) -> String {
        self.try_run(args).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// Per node (`n1`…): free AMQP and distribution ports (distinct from each
/// other and from `epmd_port`), its dir under `home` with an empty plugin
/// list and its listener's config, its log under `root`.
fn node_dirs(root: &Path, home: &Path, epmd_port: u16) -> Vec<RabbitNode> {
    let mut taken: Vec<u16> = vec![epmd_port];
    let mut distinct_port = || loop {
        let p = free_port();
        if !taken.contains(&p) {
            taken.push(p);
            return p;
        }
    };
    let mut nodes = Vec::with_capacity(NODES);
    for i in 1..=NODES {
        let port = distinct_port();
        let dist_port = distinct_port();
        let dir = home.join(format!("n{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        std::fs::write(
            dir.join("rabbitmq.conf"),
            format!("listeners.tcp.local = 127.0.0.1:{port}\n"),
        )
        .unwrap();
        nodes.push(RabbitNode {
            node: format!("chaos{port}@localhost"),
            port,
            dist_port,
            dir,
            log: root.join(format!("logs/rabbitmq-n{i}.log")),
            process: None,
        });
    }
    nodes
}
