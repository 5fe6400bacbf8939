//! `TestApp`: a fresh stockd for one test — its own MariaDB database, Redis key
//! prefix and RabbitMQ queue names, the api on port 0, and (optionally) a
//! consumer. `cleanup()` removes everything the test created.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use deadpool_redis::redis;
use lapin::options::BasicPublishOptions;
use mysql_async::prelude::Queryable;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use stockd::config::{Durability, Settings};
use stockd::domain::SkuId;
use stockd::resources::Resources;
use stockd::roles::api::{self, ApiHandle};
use stockd::roles::consumer::Consumer;

pub const ADMIN_TOKEN: &str = "test-admin-token";

/// Who connects as whom — the one place the tests name their users.
///
/// stockd itself (every role, and `stockd` CLI children through `cli_env`)
/// runs as the least-privilege runtime users that `scripts/services.sh up`
/// creates, so every test proves their grants sufficient. Set-up and clean-up
/// (migrations, dropping the database, deleting keys and queues) and the
/// tests' own reads and writes behind stockd's back run as the migration /
/// admin identities. A test on a private server (`TestOptions::redis_url`)
/// keeps that server's own auth. Passwords: scripts/services.sh.
pub mod users {
    /// MySQL: SELECT, INSERT, UPDATE on `stockd%`.*.
    pub const MYSQL_RUNTIME: &str = "stockd_app:stockd-app-local";
    /// MySQL: DDL and DML on `stockd%` databases (`stockd migrate`).
    pub const MYSQL_MIGRATE: &str = "stockd_migrate:stockd-migrate-local";
    /// Redis ACL user: stockd's key prefixes, sold-out channel and commands.
    pub const REDIS_RUNTIME: &str = "stockd_app:stockd-app-local";
    /// RabbitMQ: configure/write/read on `stockd.` / `t_<hex>.` names.
    pub const AMQP_RUNTIME: &str = "stockd_app:stockd-app-local";
    /// RabbitMQ admin of the local broker (deletes the test's queues).
    pub const AMQP_ADMIN: &str = "guest:guest";
}

/// A test's last change to its settings.
pub type SettingsTweak = std::sync::Arc<dyn Fn(&mut Settings) + Send + Sync>;

/// What a test wants running.
#[derive(Clone)]
pub struct TestOptions {
    pub consumer: bool,
    pub closer: bool,
    pub durability: Durability,
    pub ttl_secs: u64,
    pub webhook_url: Option<String>,
    /// Another Redis than the shared one (tests that read server-wide stats).
    pub redis_url: Option<String>,
    /// Last word on the settings (fault tests: URLs through a `FaultProxy`,
    /// short timeouts). Test helpers still reach MySQL directly.
    pub tweak: Option<SettingsTweak>,
}

impl Default for TestOptions {
    fn default() -> Self {
        Self {
            consumer: true,
            closer: false,
            durability: Durability::Queue,
            ttl_secs: 900,
            webhook_url: None,
            redis_url: None,
            tweak: None,
        }
    }
}

pub struct TestApp {
    pub id: String,
    pub base: String,
    pub client: reqwest::Client,
    pub res: Resources,
    cancel: CancellationToken,
    api: Option<ApiHandle>,
    consumer_cancel: CancellationToken,
    consumer: Option<tokio::task::JoinHandle<()>>,
    closer: Option<tokio::task::JoinHandle<()>>,
    extra_apis: Vec<ApiHandle>,
    /// The test's database without any proxy in between, as the migration
    /// user (helpers' reads and writes).
    direct_db: stockd::db::Db,
    /// Settings without the tweak, as the admin identities of [`users`]:
    /// cleanup and helpers reach every store directly.
    direct_settings: Settings,
    /// Set once the test's data is gone; otherwise `Drop` removes it (a test
    /// that panicked never reaches `cleanup`).
    purged: bool,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if self.purged {
            return;
        }
        let settings = self.direct_settings.clone();
        // Drop runs inside the test's runtime, which cannot be blocked on: purge
        // from a thread with a runtime of its own.
        let purger = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(purge(&settings));
        });
        let _ = purger.join();
    }
}

/// Removes everything a test created: its Redis keys, queues, exchanges and
/// database. Used by `cleanup()` and, after a panic, by `Drop`.
pub async fn purge(settings: &Settings) {
    let prefix = settings.redis.key_prefix.clone();
    if let Ok(client) = redis::Client::open(settings.redis.url.as_str()) {
        if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
            let mut cursor: u64 = 0;
            loop {
                let scanned: redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(format!("{prefix}*"))
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn)
                    .await;
                let Ok((next, keys)) = scanned else { break };
                if !keys.is_empty() {
                    let _: redis::RedisResult<()> =
                        redis::cmd("DEL").arg(&keys).query_async(&mut conn).await;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    }
    if let Ok(amqp) = stockd::mq::connect(&settings.amqp.url, "cleanup").await {
        if let Ok(ch) = amqp.create_channel().await {
            let topology = stockd::mq::Topology::new(&settings.amqp, settings.reservation.ttl_secs);
            let _ = topology.delete(&ch).await;
        }
        let _ = amqp.close(200, "".into()).await;
    }
    if let Ok(opts) = mysql_async::Opts::from_url(&settings.mysql.url) {
        let db_name = opts.db_name().unwrap_or_default().to_string();
        let server = mysql_async::OptsBuilder::from_opts(opts).db_name(None::<String>);
        if let Ok(mut conn) = mysql_async::Conn::new(server).await {
            let _ = conn
                .query_drop(format!("DROP DATABASE IF EXISTS `{db_name}`"))
                .await;
            let _ = conn.disconnect().await;
        }
    }
}

/// The settings stockd runs with in test `id`: its own database, key prefix
/// and queue names, as the runtime users (see [`users`]).
pub fn test_settings(id: &str, opts: &TestOptions) -> Settings {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut s = Settings::load_with_vars(&dir, "test", &[]).expect("test config loads");
    s.mysql.url = format!(
        "mysql://{}@127.0.0.1:3306/stockd_{id}",
        users::MYSQL_RUNTIME
    );
    s.redis.url = format!("redis://{}@127.0.0.1:6379", users::REDIS_RUNTIME);
    s.amqp.url = format!("amqp://{}@127.0.0.1:5672/%2f", users::AMQP_RUNTIME);
    s.redis.key_prefix = format!("{id}:");
    s.amqp.queue_prefix = format!("{id}.");
    s.reservation.durability = opts.durability;
    s.reservation.ttl_secs = opts.ttl_secs;
    s.http.bind = "127.0.0.1:0".into();
    s.http.workers = 2;
    s.reconcile.webhook_url = opts.webhook_url.clone();
    if let Some(url) = &opts.redis_url {
        s.redis.url = url.clone();
    }
    s
}

/// `runtime` with the set-up / clean-up identities of [`users`]: the MySQL
/// migration user, Redis' default user, the broker's admin.
pub fn admin_settings(runtime: &Settings) -> Settings {
    let mut s = runtime.clone();
    s.mysql.url = s
        .mysql
        .url
        .replace(users::MYSQL_RUNTIME, users::MYSQL_MIGRATE);
    s.redis.url = s
        .redis
        .url
        .replace(&format!("{}@", users::REDIS_RUNTIME), "");
    s.amqp.url = s.amqp.url.replace(users::AMQP_RUNTIME, users::AMQP_ADMIN);
    s
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::with(TestOptions::default()).await
    }

    pub async fn with(opts: TestOptions) -> Self {
        init_test_logging();
        let id = format!("t_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let runtime_settings = test_settings(&id, &opts);
        let direct_settings = admin_settings(&runtime_settings);
        stockd::db::migrate::migrate(&direct_settings.mysql.url)
            .await
            .expect("migrate");
        let direct_db = stockd::db::Db::new(&direct_settings.mysql).unwrap();
        let mut settings = runtime_settings;
        if let Some(tweak) = &opts.tweak {
            tweak(&mut settings);
        }
        let res = Resources::connect(settings, &id)
            .await
            .expect("resources connect");
        let cancel = CancellationToken::new();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let api = api::start(res.clone(), listener, cancel.clone()).expect("api starts");
        let base = format!("http://{}", api.addr);
        let mut app = Self {
            id,
            base,
            client: reqwest::Client::new(),
            res,
            cancel,
            api: Some(api),
            consumer_cancel: CancellationToken::new(),
            consumer: None,
            closer: None,
            extra_apis: Vec::new(),
            direct_db,
            direct_settings,
            purged: false,
        };
        if opts.consumer {
            app.start_consumer();
        }
        if opts.closer {
            let closer = stockd::roles::closer::Closer::new(app.res.clone());
            app.closer = Some(tokio::spawn(closer.run_until_stopped(app.cancel.clone())));
        }
        app
    }

    /// Starts another api instance on the same Redis/MySQL/RabbitMQ (a second
    /// node of the fleet). Returns its base URL and state.
    pub fn spawn_api(&mut self) -> (String, actix_web::web::Data<api::ApiState>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let cancel = self.cancel.child_token();
        let handle = api::start(self.res.clone(), listener, cancel).expect("api starts");
        let base = format!("http://{}", handle.addr);
        let state = handle.state.clone();
        self.extra_apis.push(handle);
        (base, state)
    }

    /// The sold-out board of the first api instance.
    pub fn board(&self) -> std::sync::Arc<stockd::soldout::SoldOutBoard> {
        self.api
            .as_ref()
            .unwrap()
            .state
            .soldout
            .clone()
            .expect("sold-out enabled")
    }

    pub fn start_consumer(&mut self) {
        assert!(self.consumer.is_none(), "consumer already running");
        self.consumer_cancel = CancellationToken::new();
        let consumer = Consumer::new(
            self.res.settings.clone(),
            self.res.db.clone(),
            self.res.redis.clone(),
            self.res.publisher.clone(),
        )
        .with_breaker(self.res.mysql_breaker.clone());
        self.consumer = Some(tokio::spawn(
            consumer.run_until_stopped(self.consumer_cancel.clone()),
        ));
    }

    pub async fn stop_consumer(&mut self) {
        self.consumer_cancel.cancel();
        if let Some(task) = self.consumer.take() {
            task.await.unwrap();
        }
    }

    pub fn sku(n: u64) -> SkuId {
        SkuId::new(n).unwrap()
    }

    // ---- HTTP -------------------------------------------------------------

    pub async fn put_sku(&self, sku: u64, total: i64, limit: i64) -> reqwest::Response {
        self.client
            .put(format!("{}/v1/admin/skus/{sku}", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"total_stock": total, "limit_per_user": limit}))
            .send()
            .await
            .unwrap()
    }

    pub async fn create_sku(&self, sku: u64, total: i64, limit: i64) {
        let resp = self.put_sku(sku, total, limit).await;
        assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    }

    pub async fn reserve_at(&self, base: &str, sku: u64, rid: &str, user: u64) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{base}/v1/skus/{sku}/reservations"))
            .json(&json!({"request_id": rid, "user_id": user, "count": 1}))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn reserve(
        &self,
        sku: u64,
        request_id: &str,
        user: u64,
        count: u32,
    ) -> reqwest::Response {
        self.client
            .post(format!("{}/v1/skus/{sku}/reservations", self.base))
            .json(&json!({"request_id": request_id, "user_id": user, "count": count}))
            .send()
            .await
            .unwrap()
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn confirm(&self, sku: u64, rid: &str) -> (u16, Value) {
        self.post_json(&format!("/v1/skus/{sku}/reservations/{rid}/confirm"))
            .await
    }

    pub async fn cancel(&self, sku: u64, rid: &str) -> (u16, Value) {
        self.post_json(&format!("/v1/skus/{sku}/reservations/{rid}/cancel"))
            .await
    }

    /// The admin listener's base URL when `admin.bind` is set.
    pub fn admin_base(&self) -> Option<String> {
        let addr = self.api.as_ref()?.admin_addr?;
        Some(format!("http://{addr}"))
    }

    /// POST with the admin token (on the public listener).
    pub async fn post_json_admin(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn post_json(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    // ---- stores -----------------------------------------------------------

    /// A Redis connection as the admin (default) user, straight to the server:
    /// for the test's own reads and writes behind stockd's back.
    pub async fn redis_conn(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.direct_settings.redis.url.as_str()).unwrap();
        client.get_multiplexed_async_connection().await.unwrap()
    }

    pub async fn redis_available(&self, sku: u64) -> Option<i64> {
        self.res
            .redis
            .sku(Self::sku(sku))
            .await
            .unwrap()
            .map(|s| s.available)
    }

    pub async fn redis_keys(&self) -> Vec<String> {
        let mut conn = self.redis_conn().await;
        let pattern = format!("{}:*", self.id);
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .unwrap();
            keys.extend(batch);
            if next == 0 {
                return keys;
            }
            cursor = next;
        }
    }

    pub async fn mysql(&self) -> mysql_async::Conn {
        self.direct_db.conn().await.unwrap()
    }

    pub async fn mysql_available(&self, sku: u64) -> Option<i64> {
        let mut conn = self.mysql().await;
        conn.exec_first(
            "SELECT available_stock FROM sku_stock WHERE sku_id = ?",
            (sku,),
        )
        .await
        .unwrap()
    }

    pub async fn ledger_rows(&self) -> u64 {
        let mut conn = self.mysql().await;
        conn.query_first("SELECT COUNT(*) FROM stock_deduct_idempotent")
            .await
            .unwrap()
            .unwrap_or(0)
    }

    /// status -> (rows, units) of one SKU's ledger.
    pub async fn ledger_by_status(&self, sku: u64) -> HashMap<String, (u64, i64)> {
        let mut conn = self.mysql().await;
        let rows: Vec<(String, u64, i64)> = conn
            .exec(
                "SELECT status, COUNT(*), CAST(SUM(deduct_count) AS SIGNED)
                 FROM stock_deduct_idempotent WHERE sku_id = ? GROUP BY status",
                (sku,),
            )
            .await
            .unwrap();
        rows.into_iter().map(|(s, n, u)| (s, (n, u))).collect()
    }

    pub async fn ledger_status(&self, sku: u64, request_id: &str) -> Option<String> {
        let mut conn = self.mysql().await;
        conn.exec_first(
            "SELECT status FROM stock_deduct_idempotent WHERE sku_id = ? AND deduct_request_id = ?",
            (sku, request_id),
        )
        .await
        .unwrap()
    }

    /// Moves Redis `available` behind the service's back (failover / leak simulation).
    pub async fn redis_incr_available(&self, sku: u64, delta: i64) {
        let mut conn = self.redis_conn().await;
        let key = self.res.redis.keys().sku(Self::sku(sku));
        let _: i64 = redis::cmd("HINCRBY")
            .arg(&key)
            .arg("available")
            .arg(delta)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    pub async fn reconcile(&self, repair: bool) -> stockd::ops::reconcile::Report {
        self.res.reconciler.run_once(&[], repair).await.unwrap()
    }

    /// Messages ready in a queue (passive declare).
    pub async fn queue_depth(&self, queue: &str) -> u32 {
        let conn = stockd::mq::connect(&self.res.settings.amqp.url, "probe")
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        let q = ch
            .queue_declare(
                queue.into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await
            .unwrap();
        let _ = conn.close(200, "".into()).await;
        q.message_count()
    }

    /// Publishes raw bytes to the reservations exchange (duplicate / poison tests).
    pub async fn publish_raw(&self, payload: &[u8]) {
        let topology = self.res.publisher.topology();
        self.res
            .publisher
            .publish(
                &topology.reservations_exchange,
                "",
                payload,
                lapin::BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .unwrap();
        let _ = BasicPublishOptions::default();
    }

    // ---- waiting and invariants -------------------------------------------

    /// Polls `check` until it holds or `timeout` passes (then panics with `what`).
    pub async fn eventually<F, Fut>(&self, what: &str, timeout: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if check().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("timed out after {timeout:?} waiting for: {what}");
    }

    pub async fn wait_ledger_rows(&self, rows: u64) {
        self.eventually(
            &format!("{rows} ledger rows"),
            Duration::from_secs(20),
            || async { self.ledger_rows().await >= rows },
        )
        .await;
    }

    /// Waits until every outbox entry was confirmed and the work queue is empty.
    pub async fn wait_drained(&self, sku: u64) {
        let topology = self.res.publisher.topology().clone();
        self.eventually("pipeline drained", Duration::from_secs(30), || {
            let queue = topology.deduct_queue.clone();
            async move {
                let outbox = self.res.redis.outbox_len(Self::sku(sku)).await.unwrap();
                outbox == 0 && self.queue_depth(&queue).await == 0
            }
        })
        .await;
    }

    /// SPEC §10 invariants 1, 2, 7 for one SKU (call after draining).
    pub async fn assert_conserved(&self, sku: u64) {
        let mut conn = self.mysql().await;
        let (total, available): (i64, i64) = conn
            .exec_first(
                "SELECT total_stock, available_stock FROM sku_stock WHERE sku_id = ?",
                (sku,),
            )
            .await
            .unwrap()
            .expect("sku row");
        let live = stockd::db::ledger::live_units(&mut conn, Self::sku(sku))
            .await
            .unwrap();
        assert!(
            available >= 0,
            "invariant 1: MySQL available {available} < 0"
        );
        assert!(live <= total, "invariant 1: live {live} > total {total}");
        assert_eq!(total - available, live, "invariant 2: conservation");
        let redis = self
            .redis_available(sku)
            .await
            .expect("sku loaded in Redis");
        assert_eq!(redis, available, "invariant 7: Redis == MySQL after drain");
    }

    /// Stops the roles and removes the database, keys and queues of this test.
    pub async fn cleanup(mut self) {
        self.stop_consumer().await;
        self.cancel.cancel();
        if let Some(api) = self.api.take() {
            api.stopped().await;
        }
        for extra in self.extra_apis.drain(..) {
            extra.stopped().await;
        }
        if let Some(closer) = self.closer.take() {
            closer.await.unwrap();
        }
        tracing::info!("cleanup: roles stopped");
        purge(&self.direct_settings).await;
        self.purged = true;
        self.res.clone().close().await;
    }
}

fn init_test_logging() {
    if std::env::var("TEST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
            .with_test_writer()
            .try_init();
    }
}

/// A private redis-server for one test (its `INFO commandstats` count only that
/// test's commands). Killed on drop.
pub struct PrivateRedis {
    child: std::process::Child,
    pub url: String,
}

impl PrivateRedis {
    pub async fn start() -> Self {
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        // Owned at once, so a failed start still kills the child (Drop).
        let server = Self {
            child,
            url: format!("redis://127.0.0.1:{port}"),
        };
        let client = redis::Client::open(server.url.as_str()).unwrap();
        for _ in 0..100 {
            if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
                if redis::cmd("PING")
                    .query_async::<String>(&mut conn)
                    .await
                    .is_ok()
                {
                    return server;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("private redis-server did not start on {port}");
    }

    /// `calls` of EVAL + EVALSHA so far.
    pub async fn script_calls(&self) -> u64 {
        let client = redis::Client::open(self.url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .unwrap();
        info.lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
            .filter_map(|l| {
                l.split("calls=")
                    .nth(1)?
                    .split(',')
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
