//! One scenario's whole installation: private Redis (one server, or a 6-node
//! Redis Cluster with [`RedisSetup::Cluster`]), MariaDB (one server, or a
//! primary + asynchronous replica behind a proxy with
//! [`MysqlSetup::PrimaryReplica`]) and RabbitMQ,
//! the stockd roles as processes, and the names (keys, queues) they use.
//! Dropping it stops every process by pid and removes the temp dir; after a
//! panic it first prints the tail of every log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use stockd::config::Settings;
use stockd::mq::Topology;
use stockd::redis::{Keys, RedisLink, RedisStore};

use crate::net::{Net, Place};
use crate::previous_release::Release;
use crate::servers::broker::Broker;
use crate::servers::mariadb::Mariadb;
use crate::servers::mariadb_replica::MysqlPair;
use crate::servers::mysql::{Mysql, MysqlSetup};
use crate::servers::process::{free_port, log_tail, TempDir};
use crate::servers::rabbit_cluster::RabbitCluster;
use crate::servers::rabbitmq::Rabbit;
use crate::servers::redis::Redis;
use crate::servers::redis_cluster::RedisCluster;
use crate::stockd::{run_cli, start_role, CliOutput, RoleProcess, StockdEnv, ADMIN_TOKEN};

/// Database of every chaos stack (the server is private, the name can be fixed).
pub const DB_NAME: &str = "stockd_chaos";
/// A role is retried this long when its dependencies are not back yet.
const ROLE_START_LIMIT: Duration = Duration::from_secs(90);
/// One-shot subcommands (migrate, warmup, reconcile, audit).
const CLI_LIMIT: Duration = Duration::from_secs(120);

/// Which Redis a stack runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisSetup {
    /// One redis-server (every scenario up to s12).
    Standalone,
    /// A 6-node Redis Cluster (3 primaries + 3 replicas); stockd runs with
    /// `redis.mode: cluster` and every node in `redis.urls`.
    Cluster,
}

pub struct Stack {
    pub name: String,
    // Field order is drop order: stockd processes, then servers, then the dir.
    roles: BTreeMap<String, RoleProcess>,
    /// The harness's own cluster client (routes each key to its slot's primary).
    harness_store: Option<RedisStore>,
    redis: Option<Redis>,
    cluster: Option<RedisCluster>,
    /// One server, or a primary + replica pair behind a proxy.
    pub mysql: Mysql,
    /// One private node, or a 3-node cluster ([`Stack::start_rabbit_cluster`]).
    pub rabbit: Broker,
    pub env: StockdEnv,
    /// The settings every stockd process of this stack runs with.
    pub settings: Settings,
    pub topology: Topology,
    pub keys: Keys,
    /// Base URL of the api role (fixed port, so a restarted api is found again).
    pub base: String,
    pub http: reqwest::Client,
    role_ports: BTreeMap<String, u16>,
    spawns: u32,
    /// The namespaces of a partition scenario (s18–s22), dropped after every
    /// process that runs in them; None: everything on loopback.
    pub net: Option<Net>,
    dir: TempDir,
}

impl Stack {
    /// Starts the three servers (in parallel), migrates; no role runs yet.
    /// `extra` are scenario settings (`STOCKD__…` variables); `setup` picks one
    /// redis-server or the 6-node cluster, `rabbit_cluster` one RabbitMQ node
    /// or a 3-node cluster (`amqp.urls` lists every node, `amqp.url` is the
    /// first), `mysql` one mariadbd or a replicated pair (migrated through
    /// its proxy, the replica caught up before this returns). With a `net`,
    /// each server and role runs in its host of `net` (`redis`,
    /// `redis0`…`redis5` for a cluster's nodes, `mysql`, `api`, `consumer`,
    /// …): a host `net` has no namespace for runs in the root namespace on the
    /// root-side veth's address, reachable from every host; None: all on
    /// loopback.
    pub async fn start_placed(
        name: &str,
        extra: &[(&str, String)],
        setup: RedisSetup,
        rabbit_cluster: bool,
        mysql: MysqlSetup,
        net: Option<Net>,
    ) -> Self {
        assert!(
            !(rabbit_cluster && net.is_some()),
            "the RabbitMQ cluster runs on loopback only"
        );
        assert!(
            !(mysql == MysqlSetup::PrimaryReplica && net.is_some()),
            "the MySQL primary + replica pair runs on loopback only"
        );
        let place = |host: &str| {
            net.as_ref()
                .map_or(Place::loopback(), |n| n.place_or_root(host))
        };
        let dir = TempDir::new(&format!("chaos-{name}"));
        let root = dir.path.clone();
        println!("[{name}] starting private servers under {}", root.display());
        let servers = Servers::start(&root, setup, rabbit_cluster, mysql, &place).await;
        let api_port = free_port();
        let api_ip = place("api").ip;
        let env = servers.stockd_env(&format!("{api_ip}:{api_port}"), extra);
        let settings = load_settings(name, &env);
        let topology = Topology::new(&settings.amqp, &settings.reservation);
        let keys = Keys::new(&settings.redis.key_prefix);
        let harness_store = servers.cluster.as_ref().map(|_| {
            RedisStore::new(&settings.redis, settings.reservation.ttl_secs)
                .unwrap_or_else(|e| panic!("[{name}] harness cluster client: {e}"))
        });
        let stack = Self {
            name: name.to_string(),
            roles: BTreeMap::new(),
            harness_store,
            redis: servers.redis,
            cluster: servers.cluster,
            mysql: servers.mysql,
            rabbit: servers.rabbit,
            env,
            settings,
            topology,
            keys,
            base: format!("http://{api_ip}:{api_port}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .pool_idle_timeout(crate::load::POOL_IDLE_TIMEOUT)
                .build()
                .unwrap(),
            role_ports: BTreeMap::from([("api".to_string(), api_port)]),
            spawns: 0,
            net,
            dir,
        };
        let migrate = stack.cli(&["migrate"]).await;
        assert_eq!(migrate.code, Some(0), "migrate: {}", migrate.text());
        if let Mysql::Pair(pair) = &stack.mysql {
            pair.replicate().await;
            pair.wait_caught_up().await;
        }
        stack
    }

    /// The single redis-server (panics on a cluster stack).
    pub fn redis(&self) -> &Redis {
        self.redis.as_ref().expect("a standalone Redis stack")
    }

    pub fn redis_mut(&mut self) -> &mut Redis {
        self.redis.as_mut().expect("a standalone Redis stack")
    }

    /// The Redis Cluster (panics on a standalone stack).
    pub fn cluster(&self) -> &RedisCluster {
        self.cluster.as_ref().expect("a Redis Cluster stack")
    }

    pub fn cluster_mut(&mut self) -> &mut RedisCluster {
        self.cluster.as_mut().expect("a Redis Cluster stack")
    }

    /// The harness's connection for its own reads: a direct connection to the
    /// single server, or the cluster client (each command routed by its key;
    /// a pipeline must stay within one slot, i.e. one SKU).
    pub async fn redis_link(&self) -> RedisLink {
        match &self.harness_store {
            None => RedisLink::Shared(self.redis().conn().await),
            Some(store) => tokio::time::timeout(Duration::from_secs(5), store.side_link())
                .await
                .expect("cluster client: connect timed out")
                .unwrap_or_else(|e| panic!("cluster client: {e}")),
        }
    }

    /// Starts `role` (api, consumer, closer, reconciler) and waits until live.
    pub async fn start_role(&mut self, role: &str) {
        self.start_role_as(role, role).await;
    }

    /// Starts one more process of `role` under the name `key` (a second api,
    /// `api2`, with its own port and, in a partition scenario, its own host).
    pub async fn start_role_as(&mut self, key: &str, role: &str) {
        self.start_release_role(key, role, None).await;
    }

    /// [`Self::start_role_as`] with the binary of `release` (None: this
    /// build's), reading the config dir that release ships.
    pub async fn start_release_role(&mut self, key: &str, role: &str, release: Option<&Release>) {
        assert!(!self.roles.contains_key(key), "{key} already running");
        let port = *self
            .role_ports
            .entry(key.to_string())
            .or_insert_with(free_port);
        let logs = self.dir.path.join("logs");
        let place = self.place_of(key);
        let mut env = self.env.clone();
        if let Some(release) = release {
            env.program = Some(release.binary.clone());
            env.set("STOCKD_CONFIG_DIR", release.config_dir.display());
        }
        let proc = start_role(
            &env,
            role,
            &place,
            port,
            &logs,
            &mut self.spawns,
            ROLE_START_LIMIT,
        )
        .await;
        let build = release.map_or("this build".to_string(), |r| {
            format!("release {}", r.commit)
        });
        println!(
            "  stockd --role {role} ({build}) live as {key} (pid {}, {}:{port})",
            proc.process.pid(),
            place.ns_name()
        );
        self.roles.insert(key.to_string(), proc);
    }

    /// Where the process or server called `host` runs (see [`Self::start_placed`]).
    pub fn place_of(&self, host: &str) -> Place {
        self.net
            .as_ref()
            .map_or(Place::loopback(), |n| n.place_or_root(host))
    }

    /// The partition scenario's namespaces (panics on a loopback stack).
    pub fn net(&self) -> &Net {
        self.net.as_ref().expect("a stack started with a Net")
    }

    /// Base URL of the api process `key` (`api`, `api2`), once it was started.
    pub fn base_of(&self, key: &str) -> String {
        let port = self
            .role_port(key)
            .unwrap_or_else(|| panic!("{key} never started"));
        format!("http://{}:{port}", self.place_of(key).ip)
    }

    pub async fn start_roles(&mut self, roles: &[&str]) {
        for role in roles {
            self.start_role(role).await;
        }
    }

    /// kill -9 of one role process.
    pub fn kill_role(&mut self, role: &str) {
        let mut proc = self
            .roles
            .remove(role)
            .unwrap_or_else(|| panic!("{role} is not running"));
        proc.process.kill9();
    }

    /// SIGTERM (graceful drain) of one role process.
    pub fn stop_role(&mut self, role: &str) {
        if let Some(mut proc) = self.roles.remove(role) {
            proc.process.terminate();
        }
    }

    /// Fails loudly when a role died on its own (a crash is a finding).
    pub fn assert_roles_alive(&mut self) {
        for (role, proc) in self.roles.iter_mut() {
            if let Some(status) = proc.process.exited() {
                panic!(
                    "stockd --role {role} exited on its own ({status})\n{}",
                    proc.process.log_tail()
                );
            }
        }
    }

    /// Whether this binary accepts a configuration variable (keys being added
    /// on main are used once they exist; an unknown key stops every process).
    pub async fn accepts_setting(&self, var: &str, value: &str) -> bool {
        let mut env = self.env.clone();
        env.set(var, value);
        let out = run_cli(
            &env,
            &["config", "check"],
            &self.dir.path.join("cli"),
            CLI_LIMIT,
        )
        .await;
        out.code == Some(0)
    }

    pub async fn cli(&self, args: &[&str]) -> CliOutput {
        run_cli(&self.env, args, &self.dir.path.join("cli"), CLI_LIMIT).await
    }

    /// `PUT /v1/admin/skus/{sku}`: creates the SKU in MySQL and loads it into Redis.
    pub async fn create_sku(&self, sku: u64, total: i64, limit: i64) {
        let resp = self
            .http
            .put(format!("{}/v1/admin/skus/{sku}", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"total_stock": total, "limit_per_user": limit}))
            .send()
            .await
            .expect("PUT sku");
        let status = resp.status();
        let body = resp.text().await.unwrap_or_default();
        assert_eq!(status, 200, "creating sku {sku}: {body}");
        println!("  sku {sku}: total {total}, limit_per_user {limit}");
    }

    /// Port of a role's `/livez` and `/metrics` (http.bind of the api,
    /// metrics.bind of the others), once it was started.
    pub fn role_port(&self, role: &str) -> Option<u16> {
        self.role_ports.get(role).copied()
    }

    /// Where every server and role process writes its log.
    pub fn logs_dir(&self) -> PathBuf {
        self.dir.path.join("logs")
    }

    /// A connection to the stack's database.
    pub async fn db(&self) -> mysql_async::Conn {
        self.mysql.conn(DB_NAME).await
    }

    /// Every log of the stack, tails concatenated.
    pub fn log_tails(&self) -> String {
        let mut out = String::new();
        let Ok(entries) = std::fs::read_dir(self.dir.path.join("logs")) else {
            return out;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            out.push_str(&log_tail(&path, 25));
        }
        out
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("[{}] FAILED; logs:\n{}", self.name, self.log_tails());
        }
        for (_, mut proc) in std::mem::take(&mut self.roles) {
            proc.process.kill9();
        }
    }
}

/// The stack's MySQL of `setup`: one server in `place`, or the pair on loopback.
async fn start_mysql(root: &Path, setup: MysqlSetup, place: Place) -> Mysql {
    match setup {
        MysqlSetup::Single => Mysql::Single(Box::new(Mariadb::start_at(root, place).await)),
        MysqlSetup::PrimaryReplica => Mysql::Pair(Box::new(MysqlPair::start(root).await)),
    }
}

/// A stack's private servers, before any stockd process runs.
struct Servers {
    redis: Option<Redis>,
    cluster: Option<RedisCluster>,
    mysql: Mysql,
    rabbit: Broker,
}

impl Servers {
    /// Starts Redis (or its cluster), MySQL (or its pair) and RabbitMQ (or
    /// its cluster) in parallel under `root`, each in its host's `place`.
    async fn start(
        root: &Path,
        setup: RedisSetup,
        rabbit_cluster: bool,
        mysql: MysqlSetup,
        place: impl Fn(&str) -> Place,
    ) -> Self {
        let redis_start = async {
            match setup {
                RedisSetup::Standalone => (Some(Redis::start_at(root, place("redis")).await), None),
                RedisSetup::Cluster => {
                    let places = (0..crate::servers::redis_cluster::NODES)
                        .map(|i| place(&format!("redis{i}")))
                        .collect();
                    (None, Some(RedisCluster::start_at(root, places).await))
                }
            }
        };
        let broker = async {
            if rabbit_cluster {
                Broker::Cluster(RabbitCluster::start(root).await)
            } else {
                Broker::Single(Rabbit::start_at(root, &place("broker")).await)
            }
        };
        let mysql_start = start_mysql(root, mysql, place("mysql"));
        let ((redis, cluster), mysql, rabbit) = tokio::join!(redis_start, mysql_start, broker);
        Self {
            redis,
            cluster,
            mysql,
            rabbit,
        }
    }

    /// The environment of every stockd process: these servers' URLs, the
    /// api's `http_bind`, a metrics port, the admin token, then `extra`.
    fn stockd_env(&self, http_bind: &str, extra: &[(&str, String)]) -> StockdEnv {
        let mut env = StockdEnv::default();
        env.set("STOCKD_CONFIG_DIR", config_dir().display());
        env.set("STOCKD_ENV", "test");
        env.set("STOCKD__MYSQL__URL", self.mysql.url(DB_NAME));
        match (&self.redis, &self.cluster) {
            (Some(redis), _) => env.set("STOCKD__REDIS__URL", redis.url()),
            (None, Some(cluster)) => {
                env.set("STOCKD__REDIS__MODE", "cluster");
                env.set("STOCKD__REDIS__URL", cluster.nodes[0].url());
                env.set("STOCKD__REDIS__URLS", cluster.urls());
            }
            (None, None) => unreachable!("a stack has a Redis"),
        }
        env.set("STOCKD__AMQP__URL", self.rabbit.url());
        if let Some(urls) = self.rabbit.urls() {
            env.set("STOCKD__AMQP__URLS", urls);
        }
        env.set("STOCKD__HTTP__BIND", http_bind);
        env.set(
            "STOCKD__METRICS__BIND",
            format!("127.0.0.1:{}", free_port()),
        );
        env.set("STOCKD__ADMIN__TOKEN", ADMIN_TOKEN);
        env.set("STOCKD__LOGGING__LEVEL", "info");
        for (k, v) in extra {
            env.set(k, v);
        }
        env
    }
}

/// The repository's config dir, what every stockd process reads.
fn config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config")
}

/// The settings of `env`'s `STOCKD__…` variables, as stockd loads them.
fn load_settings(name: &str, env: &StockdEnv) -> Settings {
    let vars: Vec<(String, String)> = env
        .vars
        .iter()
        .filter(|(k, _)| k.starts_with("STOCKD__"))
        .cloned()
        .collect();
    Settings::load_with_vars(&config_dir(), "test", &vars)
        .unwrap_or_else(|e| panic!("[{name}] settings {vars:?}: {e:#}"))
}
