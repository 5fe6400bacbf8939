//! Scenario 27: Redis Cluster, a failover of an order shard's primary right
//! after commits (issue 50 D5). Orders of four lines over six SKUs, none of
//! them on primary A, the primary of the most order shards. The commits
//! are made to land inside the replication lag: `CLIENT PAUSE WRITE` on
//! primary B (three of the SKUs; every order has a line there) stops every
//! order between its intent and its commit; meanwhile A's replica is frozen
//! and its link dropped (as s14 does), so the commits A acknowledges when
//! the pause ends never reach the replica. Once MySQL has every order
//! answered 201, A is killed and the stale replica takes over: the orders
//! of A's shards whose intent it had are `HOLDING` again, their lines
//! held on B and C. Past their deadline the sweeper asks MySQL and
//! re-commits them; it must release nothing (before the fix it released
//! every line: units available in Redis that MySQL has sold). Then the
//! reconciler finds no drift, orders flow again, and the stores agree and
//! both audits are clean.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use deadpool_redis::redis;

use super::orders::{self, order_ids_in_mysql, PlacedOrder};
use super::{cluster, reconcile, Scenario};
use crate::stack::{RedisSetup, Stack};
use crate::stores;

/// `orders.hold_timeout_ms`: long enough that the lost commits are still
/// `HOLDING` (not yet past their deadline) when the harness reads them after
/// the takeover; hold + sweep stays below `reconcile.lost_after_ms` (10 s).
const HOLD_TIMEOUT_MS: u64 = 8_000;
/// How long primary B refuses writes: the orders wait between their intent
/// and their line on B, and A's replica link is dropped meanwhile.
const PAUSE_MS: u64 = 1_500;
/// `redis.command_timeout_ms`: a hold waiting out the pause must not time out.
const COMMAND_TIMEOUT_MS: u64 = 3_000;
/// SKUs per primary B and C: with four lines of six SKUs, every order has a
/// line on B.
const SKUS_PER_PRIMARY: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s27_cluster_failover_losing_order_commits_releases_nothing_mysql_holds() {
    let settings = vec![
        (
            "STOCKD__REDIS__COMMAND_TIMEOUT_MS",
            COMMAND_TIMEOUT_MS.to_string(),
        ),
        (
            "STOCKD__ORDERS__HOLD_TIMEOUT_MS",
            HOLD_TIMEOUT_MS.to_string(),
        ),
    ];
    let mut sc = Scenario::begin_on(
        "s27",
        "Redis Cluster: failover of an order shard's primary loses commits answered 201",
        &settings,
        RedisSetup::Cluster,
    )
    .await;
    let layout = Layout::find(&sc.stack).await;
    sc.note(&layout.describe());
    sc.open_skus(&layout.skus, 3_000, 20).await;
    cluster::print_placement(&sc, &layout.skus).await;

    let load = orders::start(&mut sc, "s27a", &layout.skus, 4, 2_000, 48, 20);
    sc.pause(3_000, 1_000).await;
    let mut placed = commit_inside_the_lag(&mut sc, &layout, load).await;
    wait_mysql_has(&mut sc, &placed).await;
    fail_over(&mut sc, &layout).await;
    let lost = lost_commits(&mut sc, &placed).await;
    judge_sweep(&mut sc, &lost).await;

    let healthy = reconcile::check(&sc).await;
    let drifted: Vec<_> = (healthy.skus.iter())
        .filter(|s| s.1 != "OK" && s.1 != "IN_FLIGHT")
        .map(|s| (s.0, s.1.clone(), s.2))
        .collect();
    sc.expect(
        drifted.is_empty(),
        format!("the reconciler finds no drift after the sweep (drifted: {drifted:?})"),
    );
    cluster::rejoin(&mut sc, layout.a).await;
    let again = orders::start(&mut sc, "s27b", &layout.skus, 4, 2_000, 8, 20);
    sc.pause(3_000, 0).await;
    let after = again.finish().await;
    let created = after.iter().filter(|o| o.status == 201).count();
    sc.expect(
        created > 0,
        format!("orders answered 201 after the failover ({created})"),
    );
    placed.extend(after);
    orders::finish(sc, &placed).await;
}

/// Where the scenario's keys live: A (killed) holds the most order shards
/// and none of the SKUs; B (paused) and C hold three SKUs each.
struct Layout {
    a: usize,
    a_replica: usize,
    /// A slot A serves: the takeover is awaited on it.
    a_slot: u16,
    b: usize,
    skus: Vec<u64>,
}

impl Layout {
    async fn find(stack: &Stack) -> Self {
        let cluster = stack.cluster();
        let mut shards_of: BTreeMap<usize, Vec<u16>> = BTreeMap::new();
        for shard in 0..stockd::redis::keys::ORDER_SHARDS {
            let slot = cluster.slot_of(&stack.keys.order_intents(shard)).await;
            let (primary, _) = cluster.owners(slot).await;
            shards_of.entry(primary).or_default().push(slot);
        }
        let (&a, slots) = (shards_of.iter())
            .max_by_key(|(_, slots)| slots.len())
            .expect("order shards");
        let a_slot = slots[0];
        let (_, replicas) = cluster.owners(a_slot).await;
        let mut by_primary: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        for sku in 271..=400 {
            let (_, primary, _) = cluster::placement(stack, sku).await;
            let skus = by_primary.entry(primary).or_default();
            if primary != a && skus.len() < SKUS_PER_PRIMARY {
                skus.push(sku);
            }
        }
        by_primary.remove(&a);
        let full: Vec<(usize, Vec<u64>)> = (by_primary.into_iter())
            .filter(|(_, skus)| skus.len() == SKUS_PER_PRIMARY)
            .collect();
        assert!(
            full.len() >= 2,
            "two primaries besides A with SKUs: {full:?}"
        );
        let mut skus: Vec<u64> = full.iter().flat_map(|(_, s)| s.clone()).collect();
        skus.sort_unstable();
        Self {
            a,
            a_replica: replicas[0],
            a_slot,
            b: full[0].0,
            skus,
        }
    }

    fn describe(&self) -> String {
        format!(
            "layout: order shards mostly on primary node {} (replica node {}, slot {}); \
             SKUs {:?} on two other primaries, node {} paused",
            self.a, self.a_replica, self.a_slot, self.skus, self.b
        )
    }
}

/// Pauses B's writes (every order waits between its intent and its line on
/// B), freezes A's replica and drops its link, stops the load; the orders
/// in flight then commit on A, acknowledged, never replicated.
async fn commit_inside_the_lag(
    sc: &mut Scenario,
    layout: &Layout,
    load: orders::OrderLoad,
) -> Vec<PlacedOrder> {
    sc.note(&format!(
        "inject: CLIENT PAUSE {PAUSE_MS} WRITE on node {} ({} orders answered so far)",
        layout.b,
        load.answered()
    ));
    let paused = Instant::now();
    let _: String = (sc.stack.cluster())
        .on_node(
            layout.b,
            redis::cmd("CLIENT").arg("PAUSE").arg(PAUSE_MS).arg("WRITE"),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    sc.note(&format!(
        "inject: SIGSTOP replica node {}, CLIENT KILL TYPE replica on primary node {}",
        layout.a_replica, layout.a
    ));
    sc.stack.cluster_mut().freeze(layout.a_replica);
    let dropped = sc.stack.cluster().drop_replica_links(layout.a).await;
    sc.note(&format!(
        "{dropped} replica link(s) dropped {:.2} s into the pause; the load stops, \
         the orders in flight commit when it ends",
        paused.elapsed().as_secs_f64()
    ));
    load.finish().await
}

/// Waits until MySQL has every order answered 201/202: their commits are
/// applied before Redis loses them.
async fn wait_mysql_has(sc: &mut Scenario, placed: &[PlacedOrder]) {
    let accepted: BTreeSet<String> = accepted(placed).into_iter().collect();
    let started = Instant::now();
    let mut missing = accepted.len();
    while started.elapsed() < Duration::from_secs(30) {
        missing = accepted
            .difference(&order_ids_in_mysql(&sc.stack).await)
            .count();
        if missing == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    sc.expect(
        missing == 0,
        format!(
            "MySQL applied the {} acknowledged orders before the failover ({missing} missing, \
             {:.1} s)",
            accepted.len(),
            started.elapsed().as_secs_f64()
        ),
    );
}

fn accepted(placed: &[PlacedOrder]) -> Vec<String> {
    (placed.iter())
        .filter(|o| matches!(o.status, 201 | 202))
        .map(|o| o.order_id.clone())
        .collect()
}

/// Kills A, thaws its stale replica and makes it take over.
async fn fail_over(sc: &mut Scenario, layout: &Layout) {
    sc.note(&format!("inject: kill -9 primary node {}", layout.a));
    sc.stack.cluster_mut().kill9(layout.a);
    sc.note(&format!(
        "SIGCONT replica node {}; CLUSTER FAILOVER TAKEOVER",
        layout.a_replica
    ));
    sc.stack.cluster_mut().thaw(layout.a_replica);
    for attempt in 1..=20 {
        match sc.stack.cluster().failover_takeover(layout.a_replica).await {
            Ok(_) => break,
            Err(err) if err.to_string().contains("master") => break,
            Err(err) => {
                sc.note(&format!("takeover attempt {attempt}: {err}; again"));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let promoted = (sc.stack.cluster())
        .wait_primary(layout.a_slot, layout.a_replica, Duration::from_secs(20))
        .await;
    sc.expect(
        promoted.is_some(),
        format!(
            "replica node {} took slot {} over ({promoted:?})",
            layout.a_replica, layout.a_slot
        ),
    );
}

/// The acknowledged orders whose record the new primary has `HOLDING`:
/// the commits the failover lost (read before their deadline passes).
async fn lost_commits(sc: &mut Scenario, placed: &[PlacedOrder]) -> Vec<PlacedOrder> {
    let statuses = record_statuses(&sc.stack, &accepted(placed)).await;
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for status in statuses.values() {
        let name = status.clone().unwrap_or_else(|| "MISSING".into());
        *by_status.entry(name).or_default() += 1;
    }
    sc.note(&format!(
        "acknowledged orders' records after the takeover, by status: {by_status:?}"
    ));
    let lost: Vec<PlacedOrder> = (placed.iter())
        .filter(|o| statuses.get(&o.order_id).and_then(Option::as_deref) == Some("HOLDING"))
        .cloned()
        .collect();
    sc.expect(
        !lost.is_empty(),
        format!("the failover lost commits answered 201 ({})", lost.len()),
    );
    lost
}

/// Past their deadline the sweeper takes the lost commits: each must be
/// re-committed (`RESERVED`, out of the index) with every line still held.
async fn judge_sweep(sc: &mut Scenario, lost: &[PlacedOrder]) {
    let ids: BTreeSet<String> = lost.iter().map(|o| o.order_id.clone()).collect();
    let bound = Duration::from_millis(HOLD_TIMEOUT_MS) + Duration::from_secs(10);
    let closed = orders::wait_intents_closed(&sc.stack, Some(&ids), bound).await;
    sc.expect(
        closed.is_some(),
        format!(
            "the sweeper took the {} lost commits ({closed:?})",
            ids.len()
        ),
    );
    let ids: Vec<String> = ids.into_iter().collect();
    let records = record_statuses(&sc.stack, &ids).await;
    let not_recommitted: Vec<_> = (records.iter())
        .filter(|(_, s)| s.as_deref() != Some("RESERVED"))
        .take(5)
        .collect();
    sc.expect(
        not_recommitted.is_empty(),
        format!("every lost commit re-committed RESERVED (not: {not_recommitted:?})"),
    );
    let lines: Vec<(u64, String)> = (lost.iter())
        .flat_map(|o| o.lines.iter().map(|&(sku, _)| (sku, o.order_id.clone())))
        .collect();
    let held = stores::record_statuses(&sc.stack, &lines).await;
    let released: Vec<_> = (held.iter())
        .filter(|(_, s)| s.as_deref() != Some("RESERVED"))
        .take(5)
        .collect();
    sc.expect(
        released.is_empty(),
        format!(
            "the sweeper released none of their {} lines (released: {released:?})",
            lines.len()
        ),
    );
}

/// Each order record's `status` on the cluster (`None`: no record).
async fn record_statuses(stack: &Stack, ids: &[String]) -> BTreeMap<String, Option<String>> {
    let mut conn = stack.redis_link().await;
    let mut out = BTreeMap::new();
    for id in ids {
        let order_id = stockd::domain::RequestId::parse(id).unwrap();
        let status: Option<String> = redis::cmd("HGET")
            .arg(stack.keys.order(&order_id))
            .arg("status")
            .query_async(&mut conn)
            .await
            .unwrap();
        out.insert(id.clone(), status);
    }
    out
}
