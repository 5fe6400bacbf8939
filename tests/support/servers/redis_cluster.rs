//! A private 6-node Redis Cluster: 3 primaries + 3 replicas, each node its own
//! data dir (AOF, `appendfsync always`, `nodes.conf`), client and bus port
//! (`cluster-port`) picked free, `cluster-node-timeout` 1500 ms, created with
//! `redis-cli --cluster create … --cluster-replicas 1 --cluster-yes`.
//!
//! Faults on one node: kill -9 (a replica is promoted), restart (it rejoins,
//! as a replica when its slots moved on), SIGSTOP / SIGCONT, `CLUSTER FAILOVER
//! TAKEOVER` on a replica, and the migration of one slot to another primary.
//! Nodes are addressed by index into [`RedisCluster::nodes`]; every process
//! is stopped by pid when the cluster is dropped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use deadpool_redis::redis;

use super::process::{free_port, log_tail, OwnedProcess};
use super::redis::timed;
use super::wait_ready;
use crate::place::Place;

/// Nodes: 3 primaries and one replica each.
pub const NODES: usize = 6;
/// Short, so a killed primary is failed over in ~2–4 s (default 15000).
pub const NODE_TIMEOUT_MS: u64 = 1_500;
/// A node answers PING within this after its start (AOF replay included).
const START_LIMIT: Duration = Duration::from_secs(30);
/// `cluster_state:ok` on every node after `--cluster create` or a failover.
const CONVERGE_LIMIT: Duration = Duration::from_secs(60);
/// Keys moved by one `MIGRATE`, and the pause after each: small and slow on
/// purpose, so a migration under load lasts seconds and requests meet the
/// slot half moved (ASK, TRYAGAIN).
const MIGRATE_BATCH: usize = 10;
const MIGRATE_PAUSE: Duration = Duration::from_millis(50);

pub struct ClusterNode {
    pub port: u16,
    /// Where it runs; it binds and announces this address (bus included).
    pub place: Place,
    pub bus_port: u16,
    /// Node id (`CLUSTER MYID`); kept across restarts in `nodes.conf`.
    pub id: String,
    dir: PathBuf,
    log: PathBuf,
    process: Option<OwnedProcess>,
    frozen: bool,
}

impl ClusterNode {
    pub fn url(&self) -> String {
        format!("redis://{}:{}", self.place.ip, self.port)
    }

    pub fn running(&self) -> bool {
        self.process.is_some()
    }

    fn spawn(&mut self) {
        let mut cmd = self.place.command("redis-server");
        let ip = self.place.ip.to_string();
        cmd.args(["--port", &self.port.to_string(), "--bind", &ip])
            // Peers and clients come from other namespaces' addresses.
            .args(["--protected-mode", "no", "--cluster-announce-ip", &ip])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--cluster-port", &self.bus_port.to_string()])
            .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
            // While one shard is down the others keep serving (the default
            // `yes` would answer CLUSTERDOWN for every slot).
            .args(["--cluster-require-full-coverage", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--save", "", "--maxmemory-policy", "noeviction"])
            .args(["--appendonly", "yes", "--appendfsync", "always"]);
        let name = format!("redis-server cluster :{}", self.port);
        self.process = Some(OwnedProcess::spawn(&name, cmd, &self.log));
    }
}

/// One line of `CLUSTER NODES` as a node sees it.
#[derive(Debug, Clone)]
pub struct NodeView {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    /// `fail` or `fail?` in the flags.
    pub failing: bool,
    /// The primary's id (replicas only).
    pub primary_id: Option<String>,
    /// Slot ranges served (primaries only).
    pub slots: Vec<(u16, u16)>,
}

impl NodeView {
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
    }
}

pub struct RedisCluster {
    pub nodes: Vec<ClusterNode>,
}

impl RedisCluster {
    /// Starts six nodes, node `i` in `places[i]` (its namespace and address),
    /// creates the cluster, waits for `cluster_state:ok` everywhere and every
    /// replica in sync.
    pub async fn start_at(root: &Path, places: Vec<Place>) -> Self {
        assert_eq!(places.len(), NODES, "one place per node");
        let started = Instant::now();
        let mut nodes = Vec::new();
        for (i, place) in places.into_iter().enumerate() {
            let port = free_port();
            let mut bus_port = free_port();
            while bus_port == port {
                bus_port = free_port();
            }
            let dir = root.join(format!("redis-cluster/{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            let mut node = ClusterNode {
                port,
                place,
                bus_port,
                id: String::new(),
                dir,
                log: root.join(format!("logs/redis-cluster-{i}.log")),
                process: None,
                frozen: false,
            };
            node.spawn();
            nodes.push(node);
        }
        let mut cluster = Self { nodes };
        for i in 0..NODES {
            cluster.wait_ping(i).await;
            let mut conn = cluster.conn(i).await;
            cluster.nodes[i].id =
                timed(redis::cmd("CLUSTER").arg("MYID").query_async(&mut conn)).await;
        }
        let mut args = vec!["--cluster".to_string(), "create".to_string()];
        args.extend(
            cluster
                .nodes
                .iter()
                .map(|n| format!("{}:{}", n.place.ip, n.port)),
        );
        args.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
        let out = redis_cli(&args, root).await;
        assert!(
            out.0 == Some(0),
            "redis-cli --cluster create failed ({:?}):\n{}",
            out.0,
            out.1
        );
        cluster.wait_converged("cluster created").await;
        println!(
            "  redis cluster up in {} ms: {}",
            started.elapsed().as_millis(),
            cluster.describe().await
        );
        cluster
    }

    /// Seed list for `STOCKD__REDIS__URLS` (every node).
    pub fn urls(&self) -> String {
        self.nodes
            .iter()
            .map(ClusterNode::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    async fn wait_ping(&self, i: usize) {
        let node = &self.nodes[i];
        let (url, log) = (node.url(), node.log.clone());
        wait_ready(
            &format!("redis cluster node :{}", node.port),
            START_LIMIT,
            || ping(url.clone()),
            || log_tail(&log, 30),
        )
        .await;
    }

    /// A direct (non-cluster) connection to node `i`.
    pub async fn conn(&self, i: usize) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.nodes[i].url()).unwrap();
        tokio::time::timeout(
            Duration::from_secs(5),
            client.get_multiplexed_async_connection(),
        )
        .await
        .unwrap_or_else(|_| panic!("connecting to :{} timed out", self.nodes[i].port))
        .unwrap_or_else(|e| panic!("connecting to :{}: {e}", self.nodes[i].port))
    }

    /// A node that runs and is not frozen, to ask about the cluster.
    fn any_live(&self) -> usize {
        self.nodes
            .iter()
            .position(|n| n.running() && !n.frozen)
            .expect("a live cluster node")
    }

    /// `CLUSTER KEYSLOT key`.
    pub async fn slot_of(&self, key: &str) -> u16 {
        let mut conn = self.conn(self.any_live()).await;
        timed(
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query_async(&mut conn),
        )
        .await
    }

    /// `CLUSTER NODES` as node `i` sees it; None when it does not answer.
    pub async fn view(&self, i: usize) -> Option<Vec<NodeView>> {
        let client = redis::Client::open(self.nodes[i].url()).ok()?;
        let ask = async {
            let mut conn = client.get_multiplexed_async_connection().await.ok()?;
            redis::cmd("CLUSTER")
                .arg("NODES")
                .query_async::<String>(&mut conn)
                .await
                .ok()
        };
        let text = tokio::time::timeout(Duration::from_secs(2), ask)
            .await
            .ok()??;
        Some(parse_nodes(&text))
    }

    /// Index of the node with `id`.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.id == id)
    }

    /// (primary, replicas) of `slot` as a live node sees it.
    pub async fn owners(&self, slot: u16) -> (usize, Vec<usize>) {
        let view = self
            .view(self.any_live())
            .await
            .expect("a live node answers CLUSTER NODES");
        let primary = view
            .iter()
            .find(|n| n.primary && n.serves(slot))
            .unwrap_or_else(|| panic!("no primary serves slot {slot}: {view:?}"));
        let replicas = view
            .iter()
            .filter(|n| n.primary_id.as_deref() == Some(primary.id.as_str()))
            .filter_map(|n| self.index_of(&n.id))
            .collect();
        (self.index_of(&primary.id).unwrap(), replicas)
    }

    /// Whether every running, unfrozen node says node `i` is the primary of `slot`.
    pub async fn all_agree_primary(&self, slot: u16, i: usize) -> bool {
        for (j, node) in self.nodes.iter().enumerate() {
            if !node.running() || node.frozen {
                continue;
            }
            let Some(view) = self.view(j).await else {
                return false;
            };
            let owner = view.iter().find(|n| n.primary && n.serves(slot));
            if owner.map(|n| n.id.as_str()) != Some(self.nodes[i].id.as_str()) {
                return false;
            }
        }
        true
    }

    /// One line: `:port primary[slots]` / `:port replica-of :port` per node.
    pub async fn describe(&self) -> String {
        let Some(view) = self.view(self.any_live()).await else {
            return "no view".into();
        };
        let port_of = |id: &str| view.iter().find(|n| n.id == id).map_or(0, |n| n.port);
        let mut parts: Vec<(u16, String)> = view
            .iter()
            .map(|n| {
                let what = if n.primary {
                    format!("primary{:?}", n.slots)
                } else {
                    format!(
                        "replica-of:{}",
                        port_of(n.primary_id.as_deref().unwrap_or(""))
                    )
                };
                let fail = if n.failing { " FAIL" } else { "" };
                (n.port, format!(":{} {what}{fail}", n.port))
            })
            .collect();
        parts.sort();
        parts
            .into_iter()
            .map(|p| p.1)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every running node: cluster_state ok, all slots served, every replica's
    /// link to its primary up.
    pub async fn converged(&self) -> bool {
        for (i, node) in self.nodes.iter().enumerate() {
            if !node.running() || node.frozen {
                continue;
            }
            let Some(info) = info(&node.url(), &["CLUSTER", "INFO"]).await else {
                return false;
            };
            if field(&info, "cluster_state") != Some("ok")
                || field(&info, "cluster_slots_assigned") != Some("16384")
            {
                return false;
            }
            let Some(repl) = info_of(&self.nodes[i].url(), "replication").await else {
                return false;
            };
            if field(&repl, "role") == Some("slave")
                && field(&repl, "master_link_status") != Some("up")
            {
                return false;
            }
        }
        true
    }

    pub async fn wait_converged(&self, what: &str) {
        let start = Instant::now();
        while !self.converged().await {
            assert!(
                start.elapsed() < CONVERGE_LIMIT,
                "redis cluster not converged ({what}) after {CONVERGE_LIMIT:?}: {}",
                self.describe().await
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until node `i` is the primary of `slot` for every live node;
    /// returns how long that took, None after `limit`.
    pub async fn wait_primary(&self, slot: u16, i: usize, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.all_agree_primary(slot, i).await {
                return Some(start.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    /// kill -9 of node `i`; its data dir (AOF, nodes.conf) stays.
    pub fn kill9(&mut self, i: usize) {
        if let Some(mut p) = self.nodes[i].process.take() {
            p.kill9();
        }
        self.nodes[i].frozen = false;
    }

    /// Starts node `i` again on its data dir: it rejoins the cluster (as a
    /// replica when another node took its slots over with a newer epoch).
    pub async fn restart(&mut self, i: usize) {
        assert!(!self.nodes[i].running(), "node {i} still running");
        self.nodes[i].spawn();
        self.wait_ping(i).await;
    }

    /// SIGSTOP of node `i`: it keeps its sockets and answers nothing.
    pub fn freeze(&mut self, i: usize) {
        if let Some(p) = self.nodes[i].process.as_mut() {
            p.freeze();
            self.nodes[i].frozen = true;
        }
    }

    pub fn thaw(&mut self, i: usize) {
        if let Some(p) = self.nodes[i].process.as_mut() {
            p.thaw();
            self.nodes[i].frozen = false;
        }
    }

    /// Runs one command on node `i` directly.
    pub async fn on_node<T: redis::FromRedisValue>(&self, i: usize, cmd: &redis::Cmd) -> T {
        let mut conn = self.conn(i).await;
        timed(cmd.query_async(&mut conn)).await
    }

    /// `CLIENT KILL TYPE replica` on primary `i`: its replicas' links drop
    /// (a frozen replica cannot reconnect, so what the primary writes from now
    /// on never reaches it — not even through the kernel's socket buffers).
    pub async fn drop_replica_links(&self, i: usize) -> i64 {
        self.on_node(
            i,
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"),
        )
        .await
    }

    /// `CLUSTER FAILOVER TAKEOVER` on replica `i`: it promotes itself without
    /// its primary's agreement nor the other primaries' votes. The error is
    /// returned (a node that is a primary already refuses it).
    pub async fn failover_takeover(&self, i: usize) -> redis::RedisResult<String> {
        let mut conn = self.conn(i).await;
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("FAILOVER").arg("TAKEOVER");
        tokio::time::timeout(Duration::from_secs(5), cmd.query_async(&mut conn))
            .await
            .unwrap_or_else(|_| panic!("CLUSTER FAILOVER TAKEOVER on node {i} timed out"))
    }

    /// Moves `slot` (and its keys) from its primary to primary `to`:
    /// SETSLOT IMPORTING / MIGRATING, MIGRATE in small paced batches, SETSLOT NODE on
    /// both and on every other primary. Returns the keys moved.
    pub async fn migrate_slot(&self, slot: u16, to: usize) -> usize {
        let (from, _) = self.owners(slot).await;
        assert_ne!(from, to, "slot {slot} already on node {to}");
        let (from_id, to_id) = (self.nodes[from].id.clone(), self.nodes[to].id.clone());
        let setslot = |state: &str, id: &str| {
            let mut c = redis::cmd("CLUSTER");
            c.arg("SETSLOT").arg(slot).arg(state).arg(id);
            c
        };
        let _: () = self.on_node(to, &setslot("IMPORTING", &from_id)).await;
        let _: () = self.on_node(from, &setslot("MIGRATING", &to_id)).await;
        let mut moved = 0;
        loop {
            let keys: Vec<String> = self
                .on_node(
                    from,
                    redis::cmd("CLUSTER")
                        .arg("GETKEYSINSLOT")
                        .arg(slot)
                        .arg(MIGRATE_BATCH),
                )
                .await;
            if keys.is_empty() {
                break;
            }
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg(self.nodes[to].place.ip.to_string())
                .arg(self.nodes[to].port)
                .arg("")
                .arg(0)
                .arg(5_000)
                .arg("KEYS")
                .arg(&keys);
            let _: String = self.on_node(from, &migrate).await;
            moved += keys.len();
            tokio::time::sleep(MIGRATE_PAUSE).await;
        }
        // The new owner first, then the old one (which then answers MOVED),
        // then the other primaries (the epoch bump spreads it anyway).
        let _: () = self.on_node(to, &setslot("NODE", &to_id)).await;
        let _: () = self.on_node(from, &setslot("NODE", &to_id)).await;
        let view = self.view(to).await.unwrap_or_default();
        for n in view.iter().filter(|n| n.primary && !n.failing) {
            if let Some(j) = self.index_of(&n.id) {
                if j != from && j != to && self.nodes[j].running() {
                    let _: () = self.on_node(j, &setslot("NODE", &to_id)).await;
                }
            }
        }
        moved
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            // OwnedProcess::drop continues a frozen group and kills it by pid.
            node.process.take();
        }
    }
}

fn parse_nodes(text: &str) -> Vec<NodeView> {
    text.lines()
        .filter_map(|line| {
            let parts: Vec<&str> = line.split_whitespace().collect();
            if parts.len() < 8 {
                return None;
            }
            let port = parts[1]
                .split('@')
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            let flags: Vec<&str> = parts[2].split(',').collect();
            let slots = parts[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|a| (a, a)),
                })
                .collect();
            Some(NodeView {
                id: parts[0].to_string(),
                port,
                primary: flags.contains(&"master"),
                failing: flags.contains(&"fail") || flags.contains(&"fail?"),
                primary_id: (parts[3] != "-").then(|| parts[3].to_string()),
                slots,
            })
        })
        .collect()
}

fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        l.trim()
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
    })
}

/// A command's text reply from `url`, None when it does not answer within 2 s.
async fn info(url: &str, args: &[&str]) -> Option<String> {
    let client = redis::Client::open(url).ok()?;
    let ask = async {
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query_async::<String>(&mut conn).await.ok()
    };
    tokio::time::timeout(Duration::from_secs(2), ask)
        .await
        .ok()
        .flatten()
}

async fn info_of(url: &str, section: &str) -> Option<String> {
    info(url, &["INFO", section]).await
}

async fn ping(url: String) -> bool {
    info(&url, &["PING"]).await.is_some()
}

/// `redis-cli args…`, killed after 60 s; (exit code, stdout + stderr).
async fn redis_cli(args: &[String], root: &Path) -> (Option<i32>, String) {
    let args = args.to_vec();
    let log = root.join("logs/redis-cli.log");
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new("redis-cli");
        cmd.args(&args);
        let mut proc = OwnedProcess::spawn("redis-cli", cmd, &log);
        let start = Instant::now();
        let code = loop {
            if let Some(status) = proc.exited() {
                break status.code();
            }
            if start.elapsed() > Duration::from_secs(60) {
                proc.kill9();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        (code, log_tail(&log, 30))
    })
    .await
    .unwrap()
}
