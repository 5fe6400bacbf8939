//! What the Redis Cluster scenarios (s13, s14, s16) share: the settings they
//! run with, where a SKU lives, the repair run, a MySQL `available_stock`
//! sampler, and the one counts line each prints.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::Scenario;
use crate::load::{Answer, Op};
use crate::stack::{Stack, DB_NAME};
use crate::stores;

/// `redis.command_timeout_ms` of the cluster scenarios: a reserve on a slot
/// whose primary is gone answers 503 within connect (1000) + 500 ms.
pub const COMMAND_TIMEOUT_MS: u64 = 500;

pub fn settings() -> Vec<(&'static str, String)> {
    vec![(
        "STOCKD__REDIS__COMMAND_TIMEOUT_MS",
        COMMAND_TIMEOUT_MS.to_string(),
    )]
}

/// Slot, primary and replica (node indexes) of a SKU's keys.
pub async fn placement(stack: &Stack, sku: u64) -> (u16, usize, usize) {
    let key = stack.keys.sku(stores::sku_id(sku));
    let cluster = stack.cluster();
    let slot = cluster.slot_of(&key).await;
    let (primary, replicas) = cluster.owners(slot).await;
    let replica = *replicas
        .first()
        .unwrap_or_else(|| panic!("slot {slot} has no replica"));
    (slot, primary, replica)
}

/// Prints where every SKU lives.
pub async fn print_placement(sc: &Scenario, skus: &[u64]) {
    for sku in skus {
        let (slot, p, r) = placement(&sc.stack, *sku).await;
        let c = sc.stack.cluster();
        println!(
            "  sku {sku}: slot {slot}, primary node {p} (:{}), replica node {r} (:{})",
            c.nodes[p].port, c.nodes[r].port
        );
    }
}

/// What `stockd reconcile --once --repair --json` did.
#[derive(Debug, Default, Clone)]
pub struct Repair {
    /// (sku, verdict, drift, missing_in_redis, repaired) per SKU.
    pub skus: Vec<(u64, String, i64, i64, bool)>,
}

impl Repair {
    /// The repaired SKUs. The JSON gives the verdict of the look after the
    /// repair: REDIS_AHEAD when only the stock CAS was left to do, OK when the
    /// rebuild of records and counters from MySQL already closed the gap.
    pub fn summary(&self) -> String {
        let done: Vec<String> = self
            .skus
            .iter()
            .filter(|s| s.4)
            .map(|s| {
                format!(
                    "sku {} repaired (verdict after the repair {}, drift {}, records missing {})",
                    s.0, s.1, s.2, s.3
                )
            })
            .collect();
        if done.is_empty() {
            "nothing".into()
        } else {
            done.join("; ")
        }
    }
}

/// Runs `stockd reconcile --once --repair --json`, prints each SKU's verdict.
pub async fn repair(sc: &Scenario) -> Repair {
    sc.note("stockd reconcile --once --repair");
    let out = sc
        .stack
        .cli(&["reconcile", "--once", "--repair", "--json"])
        .await;
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    let mut repair = Repair::default();
    match report["skus"].as_array() {
        Some(skus) => {
            for s in skus {
                println!(
                    "    sku {} verdict {} redis {} mysql {} in_flight {} drift {} missing_in_redis {} repaired {}",
                    s["sku_id"],
                    s["verdict"],
                    s["redis_available"],
                    s["mysql_available"],
                    s["in_flight"],
                    s["drift"],
                    s["missing_in_redis"],
                    s["repaired"]
                );
                repair.skus.push((
                    s["sku_id"].as_u64().unwrap_or(0),
                    s["verdict"].as_str().unwrap_or("?").to_string(),
                    s["drift"].as_i64().unwrap_or(0),
                    s["missing_in_redis"].as_i64().unwrap_or(0),
                    s["repaired"].as_bool().unwrap_or(false),
                ));
            }
        }
        None => print!("{}", out.text()),
    }
    repair
}

/// Waits until the work queues hold no ready message (bounded).
pub async fn wait_queues_empty(sc: &Scenario) {
    let stack = &sc.stack;
    sc.wait_for("work queues empty", Duration::from_secs(60), || async {
        let ready = stores::ready_counts(stack, &stores::work_queues(stack)).await;
        ready.iter().all(|(_, n)| *n == Some(0))
    })
    .await;
}

/// Samples the lowest MySQL `available_stock` of any SKU every 200 ms until
/// stopped (`i64::MAX` until the first sample).
pub struct MinAvailable {
    min: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<()>,
}

impl MinAvailable {
    pub fn start(stack: &Stack) -> Self {
        let min = Arc::new(AtomicI64::new(i64::MAX));
        let url = stack.mysql.url(DB_NAME);
        let seen = min.clone();
        let task = tokio::spawn(async move {
            let pool = mysql_async::Pool::new(url.as_str());
            loop {
                if let Ok(Ok(mut conn)) =
                    tokio::time::timeout(Duration::from_secs(2), pool.get_conn()).await
                {
                    let low: Result<Option<i64>, _> = conn
                        .query_first("SELECT MIN(available_stock) FROM sku_stock")
                        .await;
                    if let Ok(Some(low)) = low {
                        seen.fetch_min(low, Ordering::SeqCst);
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Self { min, task }
    }

    pub fn min(&self) -> i64 {
        self.min.load(Ordering::SeqCst)
    }
}

impl Drop for MinAvailable {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Units sold beyond the stock, over every SKU: live ledger units above
/// `total_stock`, plus any negative `available_stock`.
pub async fn oversold(stack: &Stack) -> i64 {
    let skus = stores::sku_rows(stack).await;
    let ledger = stores::ledger(stack).await;
    let mut live: BTreeMap<u64, i64> = BTreeMap::new();
    for row in ledger.iter().filter(|r| r.live()) {
        *live.entry(row.sku).or_default() += row.count;
    }
    skus.iter()
        .map(|s| {
            let over = live.get(&s.sku).copied().unwrap_or(0) - s.total;
            over.max(0) + (-s.available).max(0)
        })
        .sum()
}

/// Ledger rows `REJECTED`, by reason.
pub async fn rejected(stack: &Stack) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for row in stores::ledger(stack).await {
        if row.status == "REJECTED" {
            *out.entry(row.reason.unwrap_or_else(|| "-".into()))
                .or_default() += 1;
        }
    }
    out
}

/// Reserve answers on `sku` sent in `[from_ms, to_ms)`.
pub fn reserves_in(answers: &[Answer], sku: u64, from_ms: u64, to_ms: u64) -> Vec<&Answer> {
    answers
        .iter()
        .filter(|a| {
            a.op == Op::Reserve && a.sku == sku && a.sent_ms >= from_ms && a.sent_ms < to_ms
        })
        .collect()
}

/// How many of `answers` had `status`.
pub fn with_status(answers: &[&Answer], status: u16) -> usize {
    answers.iter().filter(|a| a.status == status).count()
}
