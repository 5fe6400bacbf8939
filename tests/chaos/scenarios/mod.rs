//! The fault scenarios, one test each (all `#[ignore]`: `make chaos` runs
//! them), and what every scenario shares: its seed and clock, the stack, the
//! usual opening (roles, SKUs, load) and the noted injection of its fault,
//! the expectations it collects, and the closing drain + audit. Steps that
//! only some scenarios share live beside them: `cluster`, `mysql_failover`,
//! `partition` and `partition_run`, `bounds`, `metrics`, `reconcile`, `orders`,
//! `adjustments` (s28's operator and its check of the movements).

mod s01_redis_kill;
mod s02_redis_empty;
mod s03_redis_rollback;
mod s04_broker_kill;
mod s05_mysql_outage;
mod s06_api_kill;
mod s07_consumer_kill;
mod s08_expiry_backlog;
mod s09_frozen;
mod s10_expiry_outage;
mod s11_memory_alarm;
mod s12_redis_maxmemory;
mod s13_cluster_primary_kill;
mod s14_cluster_lost_writes;
mod s15_rabbit_node_kill;
mod s16_cluster_slot_migration;
mod s17_mysql_failover;
mod s17b_mysql_semi_sync;
mod s18_partition_api_redis;
mod s19_partition_api_broker;
mod s20_partition_consumer_mysql;
mod s21_cluster_split_brain;
mod s22_flapping_redis_link;
mod s23_orders_api_kill;
mod s24_orders_consumer_kill;
mod s25_orders_redis_empty;
mod s26_rolling_upgrade;
mod s27_orders_shard_failover;
mod s28_live_adjustments;
mod s29_drop;

mod adjustments;
mod bounds;
mod cluster;
mod metrics;
mod mysql_failover;
mod orders;
mod partition;
mod partition_run;
mod reconcile;

use std::time::{Duration, Instant};

use crate::events_model::EventModel;
use crate::history::{self, History, RedisLoss, Request};
use crate::load::{Load, LoadPlan, LoadReport, Op};
use crate::seed::{run_seed, scenario_seed, Rng};
use crate::servers::mysql::MysqlSetup;
use crate::stack::{RedisSetup, Stack};
use crate::{audit, drain, stores};

/// How long a scenario waits for the pipeline to drain before auditing anyway.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(90);

pub struct Scenario {
    pub name: String,
    pub rng: Rng,
    started: Instant,
    pub stack: Stack,
    /// Expectations that did not hold, reported together at the end.
    failures: Vec<String>,
    /// Every client operation of the scenario, checked at [`Self::finish`].
    pub history: History,
    /// An order service keeping its view from events alone, compared with
    /// the ledger at [`Self::finish`] ([`Self::watch_events`]).
    events: Option<EventModel>,
}

impl Scenario {
    /// Prints the header and seed, starts the private servers and migrates.
    pub async fn begin(name: &str, title: &str, extra: &[(&str, String)]) -> Self {
        Self::begin_with(
            name,
            title,
            extra,
            RedisSetup::Standalone,
            false,
            MysqlSetup::Single,
            &[],
        )
        .await
    }

    /// [`Self::begin`] on the Redis of `setup` (one server or a cluster).
    pub async fn begin_on(
        name: &str,
        title: &str,
        extra: &[(&str, String)],
        setup: RedisSetup,
    ) -> Self {
        Self::begin_with(name, title, extra, setup, false, MysqlSetup::Single, &[]).await
    }

    /// [`Scenario::begin_on`] with the hosts `hosts` each in a network
    /// namespace of their own (`redis`, `redis0`…`redis5`, `mysql`, `api`,
    /// `api2`, `consumer`, …); every other server and role runs in the root
    /// namespace on the root-side veth's address. See [`crate::net`].
    pub async fn begin_net(
        name: &str,
        title: &str,
        extra: &[(&str, String)],
        setup: RedisSetup,
        hosts: &[&str],
    ) -> Self {
        Self::begin_with(name, title, extra, setup, false, MysqlSetup::Single, hosts).await
    }

    /// [`Scenario::begin`] on a stack with a 3-node RabbitMQ cluster.
    pub async fn begin_rabbit_cluster(name: &str, title: &str, extra: &[(&str, String)]) -> Self {
        Self::begin_with(
            name,
            title,
            extra,
            RedisSetup::Standalone,
            true,
            MysqlSetup::Single,
            &[],
        )
        .await
    }

    /// [`Scenario::begin`] on a MariaDB primary with an asynchronous replica,
    /// stockd connected through a proxy the scenario can re-point.
    pub async fn begin_mysql_pair(name: &str, title: &str, extra: &[(&str, String)]) -> Self {
        let (redis, rabbit_cluster) = (RedisSetup::Standalone, false);
        let mysql = MysqlSetup::PrimaryReplica;
        Self::begin_with(name, title, extra, redis, rabbit_cluster, mysql, &[]).await
    }

    async fn begin_with(
        name: &str,
        title: &str,
        extra: &[(&str, String)],
        setup: RedisSetup,
        rabbit_cluster: bool,
        mysql: MysqlSetup,
        hosts: &[&str],
    ) -> Self {
        let run = run_seed();
        let seed = scenario_seed(run, name);
        println!("\n===== {name}: {title}");
        println!(
            "[{name}] seed {seed} (run seed {run}; replay: CHAOS_SEED={run} make chaos, or \
             CHAOS_SEED={run} cargo test --test chaos -- --ignored --nocapture {name})"
        );
        if !extra.is_empty() {
            println!("[{name}] settings: {extra:?}");
        }
        let started = Instant::now();
        let net = (!hosts.is_empty()).then(|| crate::net::Net::new(name, hosts));
        let stack = Stack::start_placed(name, extra, setup, rabbit_cluster, mysql, net).await;
        Self {
            name: name.to_string(),
            rng: Rng::new(seed),
            started,
            stack,
            failures: Vec::new(),
            history: History::new(started),
            events: None,
        }
    }

    pub fn secs(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Prints a timestamped line (what is injected and when).
    pub fn note(&self, what: &str) {
        println!("[{} +{:.1}s] {what}", self.name, self.secs());
    }

    /// Records an expectation; a false one fails the scenario at the end
    /// (after the audit ran, so the report has every number).
    pub fn expect(&mut self, holds: bool, what: String) {
        let mark = if holds { "ok  " } else { "FAIL" };
        println!("[{} +{:.1}s] {mark} {what}", self.name, self.secs());
        if !holds {
            self.failures.push(what);
        }
    }

    /// No answer was a 500 or went unanswered (transport error, timeout):
    /// a failing dependency must give 503 + Retry-After.
    pub fn expect_sane_answers(&mut self, report: &LoadReport) {
        let bad: Vec<String> = report
            .answers
            .iter()
            .filter(|a| a.status == 0 || a.status >= 500 && a.status != 503)
            .take(5)
            .map(|a| format!("{:?} {} -> {} {}", a.op, a.rid, a.status, a.code))
            .collect();
        let n = report
            .answers
            .iter()
            .filter(|a| a.status == 0 || a.status >= 500 && a.status != 503)
            .count();
        self.expect(
            n == 0,
            format!("no 5xx other than 503 and no unanswered request ({n}: {bad:?})"),
        );
    }

    /// Starts the api, consumer and closer and creates every SKU of `skus`
    /// with `total` units, `limit` per buyer: how most scenarios open.
    pub async fn open_skus(&mut self, skus: &[u64], total: i64, limit: i64) {
        self.stack.start_roles(&["api", "consumer", "closer"]).await;
        for sku in skus {
            self.stack.create_sku(*sku, total, limit).await;
        }
    }

    /// Notes "inject: `what`", takes the load's clock (the fault's start,
    /// returned) and injects `fault` into the stack.
    pub fn inject(&mut self, load: &Load, what: &str, fault: impl FnOnce(&mut Stack)) -> u64 {
        self.note(&format!("inject: {what}"));
        let at_ms = load.elapsed_ms();
        fault(&mut self.stack);
        at_ms
    }

    /// Starts a load plan on the stack's api with a fork of the scenario rng.
    pub fn load(&mut self, plan: LoadPlan) -> Load {
        let mut rng = self.rng.fork();
        Load::start(&self.stack.base, plan, &mut rng, self.history.clone())
    }

    /// Declares that Redis lost writes the way `kind` says, in the fault
    /// that began at `from_ms` (`self.history.now_ms()` taken just before
    /// injecting it) and is over now: the history check then counts what that
    /// may do to an acknowledged outcome under its own name instead of
    /// failing (`history/loss.rs`).
    pub fn declare_redis_loss(&self, kind: RedisLoss, what: &str, from_ms: u64) {
        self.note(&format!("history: declared Redis loss {kind:?}: {what}"));
        self.history.declare(kind, what, from_ms);
    }

    /// Starts an order service that keeps its view from events alone; at
    /// [`Self::finish`] its view must equal the ledger.
    pub async fn watch_events(&mut self) {
        self.note("events: an order service model subscribes to stockd.reservation.#");
        self.events = Some(EventModel::start(&self.stack).await);
    }

    /// Sleeps `base_ms` plus seeded jitter up to `jitter_ms`.
    pub async fn pause(&mut self, base_ms: u64, jitter_ms: u64) {
        let d = self.rng.jitter_ms(base_ms, jitter_ms);
        tokio::time::sleep(d).await;
    }

    /// Waits for the drain, audits, prints the table and the duration, and
    /// fails with every unmet expectation and failed check.
    pub async fn finish(mut self, report: &LoadReport) {
        report.print_summary();
        let accepted = report.accepted();
        let skus: Vec<u64> = accepted
            .keys()
            .map(|k| k.0)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        self.note("load stopped; waiting for the pipeline to drain");
        let (drained, _) = drain::wait_drained(&self.stack, &skus, &accepted, DRAIN_LIMIT).await;
        self.expect(drained, format!("pipeline drained within {DRAIN_LIMIT:?}"));
        self.stack.assert_roles_alive();
        let failed = audit::audit_all(&self.stack, &accepted).await;
        self.failures.extend(failed);
        self.check_history().await;
        if let Some(model) = self.events.take() {
            let ledger = stores::ledger(&self.stack).await;
            let failed = model.compare(&self.stack, &ledger).await;
            self.failures.extend(failed);
        }
        self.finish_checks();
    }

    /// Prints the duration and fails with every unmet expectation.
    pub fn finish_checks(self) {
        let secs = self.secs();
        if self.failures.is_empty() {
            println!("[{}] PASSED in {secs:.1} s", self.name);
            return;
        }
        println!("[{}] FAILED in {secs:.1} s", self.name);
        panic!(
            "{}: {} failure(s):\n  {}",
            self.name,
            self.failures.len(),
            self.failures.join("\n  ")
        );
    }
}

impl Scenario {
    /// Checks the history against the ledger, prints the verdict, and fails
    /// the scenario on anything lost, duplicated or unexpected.
    async fn check_history(&mut self) {
        // Order lines are ledger rows under their order's id; the history
        // holds single reservations only (orders::finish checks orders).
        let order_ids = orders::order_ids_in_mysql(&self.stack).await;
        let mut ledger = stores::ledger(&self.stack).await;
        ledger.retain(|row| !order_ids.contains(&row.rid));
        let durability_redis = matches!(
            self.stack.settings.reservation.durability,
            stockd::config::Durability::Redis
        );
        let allow = self.history.allowances(durability_redis);
        let verdict = history::check(&self.history.entries(), &ledger, &allow);
        verdict.print(&self.name);
        if !verdict.passed() {
            self.failures.push(verdict.failure());
        }
    }
}

/// One direct answer (outside the load driver).
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub code: String,
    pub replayed: bool,
}

impl Scenario {
    /// `POST /v1/skus/{sku}/reservations` once.
    pub async fn reserve(&self, sku: u64, rid: &str, user: u64, count: u32) -> Reply {
        let reply = self.send(Op::Reserve, sku, rid, user, count).await;
        println!(
            "  reserve sku {sku} {rid} user {user} x{count} -> {} {}{}",
            reply.status,
            reply.code,
            if reply.replayed { " (replayed)" } else { "" }
        );
        reply
    }

    /// One direct reserve, confirm or cancel (`user` and `count` matter to a
    /// reserve only), recorded in the history. Panics when the api does not
    /// answer at all.
    pub async fn send(&self, op: Op, sku: u64, rid: &str, user: u64, count: u32) -> Reply {
        let request = Request {
            op,
            sku,
            rid: rid.to_string(),
            user,
            count,
        };
        let entry = history::call(&self.stack.http, &self.stack.base, &self.history, request).await;
        let done = entry.done;
        if done.status == 0 {
            panic!("{op:?} {sku}/{rid}: no answer ({})", done.code);
        }
        Reply {
            status: done.status,
            code: done.code,
            replayed: done.replayed,
        }
    }

    /// Waits until the work queues hold no ready message, at most `limit`.
    pub async fn wait_queues_empty(&self, limit: Duration) {
        let stack = &self.stack;
        self.wait_for("work queues empty", limit, || async {
            let ready =
                crate::stores::ready_counts(stack, &crate::stores::work_queues(stack)).await;
            ready.iter().all(|(_, n)| *n == Some(0))
        })
        .await;
    }

    /// Polls `check` until it holds or `limit` passes; returns whether it held.
    pub async fn wait_for<F, Fut>(&self, what: &str, limit: Duration, mut check: F) -> bool
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let start = Instant::now();
        while start.elapsed() < limit {
            if check().await {
                self.note(&format!(
                    "{what} (after {:.1} s)",
                    start.elapsed().as_secs_f64()
                ));
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.note(&format!("NOT {what} within {limit:?}"));
        false
    }
}

/// [`Scenario::open_skus`] with `(total, limit)`, then the usual load
/// ([`plan`], tagged with the scenario's name) of `(buyers, requests, rate)`
/// over `skus`, and a pause of `lead` = `(base, jitter)` ms before the fault
/// (`(0, 0)`: none, the scenario paces itself).
pub async fn open_load(
    sc: &mut Scenario,
    skus: &[u64],
    (total, limit): (i64, i64),
    (buyers, requests, rate): (u64, usize, u32),
    lead: (u64, u64),
) -> Load {
    sc.open_skus(skus, total, limit).await;
    let load = sc.load(plan(&sc.name.clone(), skus, buyers, requests, rate));
    if lead != (0, 0) {
        sc.pause(lead.0, lead.1).await;
    }
    load
}

/// The usual load: `requests` reservations at `rate` per second over `skus`,
/// `buyers` buyers, 10 % replays, 5 % confirmed and 5 % cancelled.
pub fn plan(tag: &str, skus: &[u64], buyers: u64, requests: usize, rate: u32) -> LoadPlan {
    LoadPlan::new(tag, skus, buyers, requests, rate)
}
