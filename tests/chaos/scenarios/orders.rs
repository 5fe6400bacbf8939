//! What the order scenarios (s23, s24, s25, s27) share: a seeded load of multi-line
//! orders over several SKUs (`POST /v1/orders`, one id per order, no
//! retries), the intents still open in Redis, and the closing checks: every
//! order answered 201/202 is in MySQL whole (its order row `RESERVED`, a
//! ledger row per line), the harness audit over those lines and `stockd
//! audit` (whose order checks cover every order) clean.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_redis::redis;
use mysql_async::prelude::Queryable;
use serde_json::json;

use super::{Scenario, DRAIN_LIMIT};
use crate::load::LoadReport;
use crate::seed::Rng;
use crate::stack::Stack;
use crate::{audit, drain};

/// One order as sent, and its answer (0: no answer).
#[derive(Debug, Clone)]
pub struct PlacedOrder {
    pub order_id: String,
    pub user: u64,
    pub lines: Vec<(u64, u32)>,
    pub status: u16,
}

/// A running order load: `workers` clients placing orders until stopped.
pub struct OrderLoad {
    placed: Arc<Mutex<Vec<PlacedOrder>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Orders of `lines` lines over `skus` (distinct, counts 1..=2), buyers
/// 1..=`buyers`, from `workers` clients each pausing `pause_ms` between
/// orders; order ids `<tag>-<worker>-<n>`, so each load needs its own tag.
pub fn start(
    sc: &mut Scenario,
    tag: &str,
    skus: &[u64],
    lines: usize,
    buyers: u64,
    workers: usize,
    pause_ms: u64,
) -> OrderLoad {
    let base = sc.stack.base.clone();
    start_on(sc, &base, tag, skus, lines, buyers, workers, pause_ms)
}

/// [`start`] against the api at `base` (`Stack::base_of`).
#[allow(clippy::too_many_arguments)]
pub fn start_on(
    sc: &mut Scenario,
    base: &str,
    tag: &str,
    skus: &[u64],
    lines: usize,
    buyers: u64,
    workers: usize,
    pause_ms: u64,
) -> OrderLoad {
    let placed = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for worker in 0..workers {
        let mut rng = sc.rng.fork();
        let (placed, stop, client) = (placed.clone(), stop.clone(), client.clone());
        let url = format!("{base}/v1/orders");
        let skus = skus.to_vec();
        let tag = tag.to_string();
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                let order = draw(
                    &mut rng,
                    &skus,
                    lines,
                    buyers,
                    format!("{tag}-{worker}-{n}"),
                );
                let status = send(&client, &url, &order).await;
                placed.lock().unwrap().push(PlacedOrder { status, ..order });
                // A refused connection (the api is down) answers at once.
                let pause = if status == 0 { 200 } else { pause_ms };
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        }));
    }
    OrderLoad {
        placed,
        stop,
        tasks,
    }
}

fn draw(rng: &mut Rng, skus: &[u64], lines: usize, buyers: u64, order_id: String) -> PlacedOrder {
    let mut pool = skus.to_vec();
    let mut chosen = Vec::new();
    while chosen.len() < lines.min(skus.len()) {
        let i = rng.range(0, pool.len() as u64 - 1) as usize;
        chosen.push((pool.remove(i), rng.range(1, 2) as u32));
    }
    PlacedOrder {
        order_id,
        user: rng.range(1, buyers),
        lines: chosen,
        status: 0,
    }
}

/// An order of `lines` as buyer `user`, not yet sent.
pub fn order(order_id: &str, user: u64, lines: &[(u64, u32)]) -> PlacedOrder {
    PlacedOrder {
        order_id: order_id.to_string(),
        user,
        lines: lines.to_vec(),
        status: 0,
    }
}

/// Sends `order` (again: same id, buyer and lines) to the api at `base`.
pub async fn resend(client: &reqwest::Client, base: &str, order: &PlacedOrder) -> u16 {
    send(client, &format!("{base}/v1/orders"), order).await
}

async fn send(client: &reqwest::Client, url: &str, order: &PlacedOrder) -> u16 {
    let lines: Vec<_> = order
        .lines
        .iter()
        .map(|&(sku, count)| json!({"sku_id": sku, "count": count}))
        .collect();
    let body = json!({"order_id": order.order_id, "user_id": order.user, "lines": lines});
    match client.post(url).json(&body).send().await {
        Ok(resp) => resp.status().as_u16(),
        Err(_) => 0,
    }
}

impl OrderLoad {
    /// Orders answered so far.
    pub fn answered(&self) -> usize {
        self.placed.lock().unwrap().len()
    }

    /// Stops the clients and returns every order placed.
    pub async fn finish(self) -> Vec<PlacedOrder> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for task in self.tasks {
            let _ = task.await;
        }
        let placed = self.placed.lock().unwrap().clone();
        let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
        for order in &placed {
            *by_status.entry(order.status).or_default() += 1;
        }
        println!("  orders placed: {} by status {by_status:?}", placed.len());
        placed
    }
}

/// Order ids of the intents still open (holding or being undone).
pub async fn open_intent_ids(stack: &Stack) -> BTreeSet<String> {
    let mut conn = stack.redis_link().await;
    let mut open = BTreeSet::new();
    for shard in 0..stockd::redis::keys::ORDER_SHARDS {
        let key = stack.keys.order_intents(shard);
        let ids: Vec<String> = redis::cmd("ZRANGE")
            .arg(&key)
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap_or_default();
        open.extend(ids);
    }
    open
}

/// Waits until none of `ids` is open (all, when `None`); how long it took,
/// or `None` past `limit`.
pub async fn wait_intents_closed(
    stack: &Stack,
    ids: Option<&BTreeSet<String>>,
    limit: Duration,
) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        let open = open_intent_ids(stack).await;
        let left = match ids {
            Some(ids) => open.intersection(ids).count(),
            None => open.len(),
        };
        if left == 0 {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Every order id MySQL has an order row for.
pub async fn order_ids_in_mysql(stack: &Stack) -> BTreeSet<String> {
    let mut db = stack.db().await;
    let ids: Vec<String> = db.query("SELECT order_id FROM orders").await.unwrap();
    let _ = db.disconnect().await;
    ids.into_iter().collect()
}

/// The closing checks (module doc); fails the scenario through `sc`.
pub async fn finish(sc: Scenario, placed: &[PlacedOrder]) {
    finish_with_singles(sc, placed, None).await;
}

/// [`finish`] of a scenario that also ran a load of single reservations:
/// the drain and the harness audit cover its reservations too, and the
/// history check its answers.
pub async fn finish_with_singles(
    mut sc: Scenario,
    placed: &[PlacedOrder],
    singles: Option<&LoadReport>,
) {
    let accepted_orders: Vec<&PlacedOrder> = placed
        .iter()
        .filter(|o| matches!(o.status, 201 | 202))
        .collect();
    let mut accepted = BTreeMap::new();
    for order in &accepted_orders {
        for &(sku, count) in &order.lines {
            accepted.insert((sku, order.order_id.clone()), (order.user, count));
        }
    }
    if let Some(report) = singles {
        report.print_summary();
        accepted.extend(report.accepted());
    }
    let skus: Vec<u64> = accepted
        .keys()
        .map(|k| k.0)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    sc.expect(
        !accepted_orders.is_empty(),
        format!("{} orders acknowledged", accepted_orders.len()),
    );
    let closed = wait_intents_closed(&sc.stack, None, Duration::from_secs(30)).await;
    sc.expect(
        closed.is_some(),
        format!("no intent open after the load (closed in {closed:?})"),
    );
    sc.note("load stopped; waiting for the pipeline to drain");
    let (drained, _) = drain::wait_drained(&sc.stack, &skus, &accepted, DRAIN_LIMIT).await;
    sc.expect(drained, format!("pipeline drained within {DRAIN_LIMIT:?}"));
    let mut db = sc.stack.db().await;
    let rows: Vec<(String, String, Option<String>)> = db
        .query("SELECT order_id, status, reason FROM orders")
        .await
        .unwrap();
    let _ = db.disconnect().await;
    let status_of: BTreeMap<String, String> = rows
        .iter()
        .map(|(o, s, _)| (o.clone(), s.clone()))
        .collect();
    let reason_of: BTreeMap<&str, Option<&str>> = rows
        .iter()
        .map(|(o, _, r)| (o.as_str(), r.as_deref()))
        .collect();
    let missing: Vec<String> = accepted_orders
        .iter()
        .filter(|o| status_of.get(&o.order_id).map(String::as_str) != Some("RESERVED"))
        .map(|o| {
            let id = o.order_id.as_str();
            format!(
                "{id} {:?} {:?} {:?}",
                status_of.get(id),
                reason_of.get(id),
                o.lines
            )
        })
        .take(5)
        .collect();
    sc.expect(
        missing.is_empty(),
        format!("every acknowledged order is RESERVED in MySQL (not: {missing:?})"),
    );
    let refused_in_mysql: Vec<&str> = placed
        .iter()
        .filter(|o| matches!(o.status, 400..=499) && status_of.contains_key(&o.order_id))
        .map(|o| o.order_id.as_str())
        .take(5)
        .collect();
    sc.expect(
        refused_in_mysql.is_empty(),
        format!("no refused order reached MySQL ({refused_in_mysql:?})"),
    );
    let failed = audit::audit_all(&sc.stack, &accepted).await;
    for failure in failed {
        sc.expect(false, failure);
    }
    if singles.is_some() {
        sc.check_history().await;
    }
    sc.stack.assert_roles_alive();
    sc.finish_checks();
}
