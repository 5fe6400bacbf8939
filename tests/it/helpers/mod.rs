//! `TestApp`: a fresh stockd for one test — its own MariaDB database, Redis key
//! prefix and RabbitMQ queue names, the api on port 0, and (optionally) a
//! consumer. `cleanup()` checks the work queue drained, then removes everything
//! the test created. Split by concern: `http` (requests), `stores` (direct
//! reads and writes of Redis, MySQL, RabbitMQ), `wait` (conditions and
//! invariants), `purge` (settings and removal), `operator` (the `stockd`
//! CLI, messages put into queues, failures faked), `private_redis`, `sources`
//! (the crate's source text, for the layering tests).

#![allow(dead_code)]

pub mod events;
pub mod http;
mod metrics;
mod operator;
pub mod private_redis;
mod purge;
pub mod sources;
mod stores;
mod test_tools;
pub mod users;
mod wait;

pub use http::send_for_json;
pub use metrics::series_of;
pub use operator::success_and_output;
pub use private_redis::PrivateRedis;
pub use purge::{broker, purge, standalone_redis, test_settings, undrained};
pub use test_tools::test_tool;
pub use wait::{poll_until, poll_until_steady};

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use stockd::config::{Durability, Settings};
use stockd::domain::{OrderLine, OrderLines, SkuId};
use stockd::ops::reconcile::Reconciler;
use stockd::resources::Resources;
use stockd::roles::api::{self, ApiHandle};
use stockd::roles::consumer::Consumer;

pub const ADMIN_TOKEN: &str = "test-admin-token";

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
    /// The api's reconciler: `reconcile()` drives its one step and the admin
    /// routes and console see the same history, as in one stockd process.
    pub reconciler: Arc<Reconciler>,
    cancel: CancellationToken,
    api: Option<ApiHandle>,
    consumer_cancel: CancellationToken,
    /// Deliveries the running consumer holds unacked (see `wait_drained`).
    consumer_in_hand: Arc<AtomicUsize>,
    consumer: Option<tokio::task::JoinHandle<()>>,
    closer: Option<tokio::task::JoinHandle<()>>,
    extra_apis: Vec<ApiHandle>,
    /// The test's database without any proxy in between, as the migration
    /// user (helpers' reads and writes).
    direct_db: stockd::db::Db,
    /// Settings without the tweak, as the admin identities of [`users`]:
    /// cleanup and helpers reach every store directly.
    pub direct_settings: Settings,
    /// Set once the test's data is gone; otherwise `Drop` removes it (a test
    /// that panicked never reaches `cleanup`) and, unless the test already
    /// failed, asserts that its work queues were drained — nothing ready, and
    /// nothing unacked in the hands of the consumer still running — before
    /// it purged them.
    purged: bool,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if self.purged {
            return;
        }
        let settings = self.direct_settings.clone();
        // The roles still run (no cleanup): what the consumer holds is unacked,
        // which the broker's ready count below does not show.
        let in_hand = self.consumer_in_hand();
        // Drop runs inside the test's runtime, which cannot be blocked on: purge
        // from a thread with a runtime of its own.
        let purger = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let left = undrained(&settings).await;
                purge(&settings).await;
                left
            })
        });
        let mut left = purger.join().unwrap_or_default();
        if in_hand > 0 {
            let queue = self.res.publisher.topology().deduct_queue.clone();
            left.push((format!("{queue} (unacked)"), in_hand as u32));
        }
        // A test that already failed keeps its own message; a second panic
        // inside Drop would abort the whole test binary.
        if !std::thread::panicking() {
            assert!(left.is_empty(), "work queues not drained: {left:?}");
        }
    }
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::with(TestOptions::default()).await
    }

    /// [`Self::spawn`], then SKU `sku` created with `total` units and
    /// `limit` per buyer: the start of most tests.
    pub async fn spawn_with_sku(sku: u64, total: i64, limit: i64) -> Self {
        let app = Self::spawn().await;
        app.create_sku(sku, total, limit).await;
        app
    }

    pub async fn with(opts: TestOptions) -> Self {
        init_test_logging();
        let id = format!("t_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let runtime_settings = test_settings(&id, &opts);
        let direct_settings = users::admin_settings(&runtime_settings);
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
        let reconciler = Arc::new(Reconciler::from_resources(&res));
        let api = api::start(res.clone(), reconciler.clone(), listener, cancel.clone())
            .expect("api starts");
        first_readiness_check(&api).await;
        let base = format!("http://{}", api.addr);
        let mut app = Self {
            id,
            base,
            client: reqwest::Client::new(),
            res,
            reconciler,
            cancel,
            api: Some(api),
            consumer_cancel: CancellationToken::new(),
            consumer_in_hand: Arc::new(AtomicUsize::new(0)),
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
            let closer = stockd::roles::closer::Closer::from_resources(&app.res);
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
        // Another node: its own reconciler, as another process would have.
        let reconciler = Arc::new(Reconciler::from_resources(&self.res));
        let handle =
            api::start(self.res.clone(), reconciler, listener, cancel).expect("api starts");
        let base = format!("http://{}", handle.addr);
        let state = handle.state.clone();
        self.extra_apis.push(handle);
        (base, state)
    }

    /// [`Self::spawn_api`] with its own settings: `tweak` changes a copy of
    /// this app's (a node whose clock runs ahead, say).
    pub fn spawn_api_with(
        &mut self,
        tweak: impl Fn(&mut Settings),
    ) -> (String, actix_web::web::Data<api::ApiState>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let cancel = self.cancel.child_token();
        let mut res = self.res.clone();
        let mut settings = (*res.settings).clone();
        tweak(&mut settings);
        res.settings = Arc::new(settings);
        let reconciler = Arc::new(Reconciler::from_resources(&res));
        let handle = api::start(res, reconciler, listener, cancel).expect("api starts");
        let base = format!("http://{}", handle.addr);
        let state = handle.state.clone();
        self.extra_apis.push(handle);
        (base, state)
    }

    /// The state of the first api instance.
    pub fn api_state(&self) -> &actix_web::web::Data<api::ApiState> {
        &self.api.as_ref().expect("the api runs").state
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
        let consumer = Consumer::from_resources(&self.res);
        self.consumer_in_hand = consumer.in_hand();
        self.consumer = Some(tokio::spawn(
            consumer.run_until_stopped(self.consumer_cancel.clone()),
        ));
    }

    /// Deliveries the running consumer holds unacked right now.
    pub fn consumer_in_hand(&self) -> usize {
        self.consumer_in_hand.load(Ordering::SeqCst)
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

    /// An order's lines: `count` units of each `(sku, count)`, at most 20 lines.
    pub fn order_lines(parts: &[(u64, u32)]) -> OrderLines {
        let lines = parts
            .iter()
            .map(|&(sku, count)| OrderLine {
                sku_id: Self::sku(sku),
                count,
            })
            .collect();
        OrderLines::new(lines, 20).unwrap()
    }

    /// Stops the roles and removes the database, keys and queues of this test.
    pub async fn cleanup(mut self) {
        // A test that ends right after a reservation leaves its message on the
        // way to a running consumer: give it a bounded moment to arrive. A
        // message no consumer will take still fails the check below.
        if self.consumer.is_some() {
            let settings = &self.direct_settings;
            // The broker counts ready messages only: a delivery the consumer
            // holds is its `in_hand`, one on its way to it neither, hence
            // steady over consecutive polls (as `wait_drained`).
            let drained = || async {
                self.consumer_in_hand() == 0
                    && undrained(settings).await.is_empty()
                    && self.consumer_in_hand() == 0
            };
            // Not drained in time is reported by the check below, not here.
            let _ = wait::poll_until_steady(CLEANUP_DRAIN_WAIT, drained).await;
        }
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
        // Every role stopped, so unacked deliveries are back in their queues.
        let left = undrained(&self.direct_settings).await;
        purge(&self.direct_settings).await;
        self.purged = true;
        self.res.clone().close().await;
        assert!(left.is_empty(), "work queues not drained: {left:?}");
    }
}

/// Waits (bounded, whatever the answer) until the api's background readiness
/// check completed once: before it `/readyz` answers 503, which a test
/// probing right after start-up would otherwise see.
async fn first_readiness_check(api: &ApiHandle) {
    let readiness = &api.state.readiness;
    let _ = tokio::time::timeout(FIRST_READINESS_WAIT, async {
        while readiness.last().is_none() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// Longest wait for the first readiness check (each store's own timeouts
/// bound it well within).
const FIRST_READINESS_WAIT: Duration = Duration::from_secs(10);

/// Longest wait in `cleanup` for a running consumer to take the last messages.
const CLEANUP_DRAIN_WAIT: Duration = Duration::from_secs(20);

fn init_test_logging() {
    if std::env::var("TEST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
            .with_test_writer()
            .try_init();
    }
}
