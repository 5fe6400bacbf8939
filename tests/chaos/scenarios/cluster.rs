//! What the Redis Cluster scenarios (s13, s14, s16) share: how they start
//! (and open their SKUs), where a SKU lives, a MySQL `available_stock`
//! sampler, and the repair and counts behind the one counts line each prints.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::reconcile::Repair;
use super::Scenario;
use crate::load::{Answer, Op};
use crate::stack::{RedisSetup, Stack, DB_NAME};
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

/// Starts a cluster scenario: a private 6-node Redis Cluster and [`settings`].
pub async fn begin(name: &str, title: &str) -> Scenario {
    Scenario::begin_on(name, title, &settings(), RedisSetup::Cluster).await
}

/// Every role running, each of `skus` created with 600 units, 2 per buyer,
/// and where they live printed.
pub async fn open(sc: &mut Scenario, skus: &[u64]) {
    sc.open_skus(skus, 600, 2).await;
    print_placement(sc, skus).await;
}

/// Queues empty, then `stockd reconcile --once --repair`: its report, the
/// REJECTED ledger rows by SKU and the units oversold, for the counts line.
pub async fn repair_and_count(sc: &Scenario) -> (Repair, BTreeMap<String, usize>, i64) {
    sc.wait_queues_empty(Duration::from_secs(60)).await;
    let repair = super::reconcile::repair(sc).await;
    let rejected = rejected(&sc.stack).await;
    let oversold = oversold(&sc.stack).await;
    (repair, rejected, oversold)
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

/// Restarts a killed node on its data dir and waits until the cluster agrees
/// again (the old primary rejoins as a replica of the promoted one).
pub async fn rejoin(sc: &mut Scenario, node: usize) {
    sc.note(&format!(
        "restart node {node} on its data dir (rejoins as a replica)"
    ));
    sc.stack.cluster_mut().restart(node).await;
    sc.stack
        .cluster()
        .wait_converged("old primary rejoined")
        .await;
    sc.note(&format!("cluster: {}", sc.stack.cluster().describe().await));
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

/// What became of each lost reservation: ledger status (and reason) →
/// request ids; `NO LEDGER ROW` for one MySQL never got.
pub async fn fates(stack: &Stack, lost: &[(u64, String)]) -> BTreeMap<String, Vec<String>> {
    let ledger = stores::ledger(stack).await;
    let rows = stores::by_key(&ledger);
    let mut fate: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for id in lost {
        let status = rows
            .get(id)
            .map_or("NO LEDGER ROW".to_string(), |r| match &r.reason {
                Some(reason) => format!("{} ({reason})", r.status),
                None => r.status.clone(),
            });
        fate.entry(status).or_default().push(id.1.clone());
    }
    fate
}
