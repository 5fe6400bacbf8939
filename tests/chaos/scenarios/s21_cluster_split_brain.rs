//! Scenario 21: a real Redis Cluster split brain. Every cluster node, both
//! api processes, the consumer and the closer run in network namespaces of
//! their own; the hot SKU's primary and one api node (the minority) are cut
//! from the other five nodes, the other api, the consumer and the closer
//! (the majority) by DROP rules in both minority namespaces. MySQL and the
//! broker (root namespace) stay reachable from both sides: the partition
//! splits the Redis network, so a 201 of the minority api is in the broker.
//!
//! The cluster runs as s13–s16 do (`cluster-node-timeout` 1500,
//! `cluster-require-full-coverage no`, `min-replicas-to-write` 0, the
//! default): the minority primary acknowledges the minority api's writes
//! until it sees itself in the minority (≈ node timeout), then refuses
//! (CLUSTERDOWN → 503); the majority promotes the replica; after the heal the
//! old primary rejoins as a replica of the new one and its window's writes
//! are discarded. Those acknowledged writes are counted (records missing on
//! the new primary) with the ledger status of each; `stockd reconcile --once
//! --repair` rebuilds them from MySQL. Audit clean, 0 oversold, every
//! acknowledged reservation in MySQL, every answer within its bound.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use deadpool_redis::redis;

use super::bounds::{self, Bound, Window, MARGIN_MS};
use super::cluster::{self, reserves_in, with_status};
use super::partition;
use super::{plan, reconcile, Scenario};
use crate::load::{Answer, Load, LoadReport, Op};
use crate::net::Link;
use crate::servers::redis::timed;
use crate::stack::RedisSetup;
use crate::stores;

const HOT: u64 = 211;
const SKUS: [u64; 3] = [HOT, 212, 213];
/// Every process with a network of its own (MySQL and the broker: root).
const HOSTS: [&str; 10] = [
    "redis0", "redis1", "redis2", "redis3", "redis4", "redis5", "api", "api2", "consumer", "closer",
];
/// The partition lasts this long after the majority promoted the replica
/// (the majority api must find the new primary while the old one is silent).
const AFTER_PROMOTION: Duration = Duration::from_secs(5);
/// The majority promotes the replica well within this.
const PROMOTION_LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s21_cluster_split_brain() {
    let mut extra = cluster::settings();
    extra.extend(partition::settings());
    let mut sc = Scenario::begin_net(
        "s21",
        "Redis Cluster split brain: the hot SKU's primary and one api partitioned from the majority",
        &extra,
        RedisSetup::Cluster,
        &HOSTS,
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    sc.stack.start_role_as("api2", "api").await;
    sc.stack.create_sku(HOT, 500, 2).await;
    for sku in &SKUS[1..] {
        sc.stack.create_sku(*sku, 600, 2).await;
    }
    cluster::print_placement(&sc, &SKUS).await;
    let (slot, primary, replica) = cluster::placement(&sc.stack, HOT).await;
    let links = minority_links(&sc, primary);
    let loads = start_loads(&mut sc);
    sc.pause(3_000, 1_000).await;
    let cut = [loads[0].elapsed_ms(), loads[1].elapsed_ms()];
    sc.note(&format!(
        "inject: partition node {primary} (primary of slot {slot}, sku {HOT}) and api from the majority"
    ));
    sc.stack.net().cut(&links);
    let promoted = majority_promotes(&sc, slot, primary, replica).await;
    sc.expect(
        promoted.is_some(),
        format!("the majority promoted node {replica} for slot {slot} ({promoted:?})"),
    );
    let promoted_at = [loads[0].elapsed_ms(), loads[1].elapsed_ms()];
    tokio::time::sleep(AFTER_PROMOTION).await;
    let lost = lost_on_new_primary(&sc, replica, &loads).await;
    let heal = [loads[0].elapsed_ms(), loads[1].elapsed_ms()];
    sc.stack.net().heal();
    sc.note("healed; waiting for the old primary to rejoin");
    rejoined_as_replica(&mut sc, slot, primary, replica).await;
    let [a, b] = loads;
    let (minority, majority) = (a.finish().await, b.finish().await);
    let windows = Windows {
        cut,
        promoted_at,
        heal,
    };
    judge(&mut sc, &minority, &majority, &windows);
    settle_and_count(sc, &minority, &majority, &windows, &lost).await;
}

/// The same plan on both api nodes (different request ids).
fn start_loads(sc: &mut Scenario) -> [Load; 2] {
    let mut plans = [
        plan("s21a", &SKUS, 300, 900, 50),
        plan("s21b", &SKUS, 300, 900, 50),
    ];
    for p in &mut plans {
        // The hot SKU takes half the load.
        p.skus = vec![HOT, HOT, SKUS[1], SKUS[2]];
        p.concurrency = 16;
    }
    let [pa, pb] = plans;
    let (base_a, base_b) = (sc.stack.base_of("api"), sc.stack.base_of("api2"));
    let mut rng = sc.rng.fork();
    let a = Load::start(&base_a, pa, &mut rng);
    let b = Load::start(&base_b, pb, &mut rng);
    [a, b]
}

/// DROP rules in the minority's namespaces (the primary's and the api's)
/// against every majority host; the root namespace (harness, MySQL, broker)
/// stays reachable from both sides.
fn minority_links(sc: &Scenario, primary: usize) -> Vec<Link> {
    let minority = [format!("redis{primary}"), "api".to_string()];
    let majority: Vec<_> = HOSTS
        .iter()
        .filter(|h| !minority.iter().any(|m| m == *h))
        .map(|h| sc.stack.place_of(h).ip)
        .collect();
    minority
        .iter()
        .flat_map(|m| majority.iter().map(move |ip| Link::to_addr(m, *ip)))
        .collect()
}

/// Waits until every majority node names `replica` the primary of `slot`.
async fn majority_promotes(
    sc: &Scenario,
    slot: u16,
    old: usize,
    replica: usize,
) -> Option<Duration> {
    let cluster = sc.stack.cluster();
    let start = Instant::now();
    while start.elapsed() < PROMOTION_LIMIT {
        let mut agree = true;
        for j in (0..cluster.nodes.len()).filter(|j| *j != old) {
            let view = cluster.view(j).await.unwrap_or_default();
            let owner = view.iter().find(|n| n.primary && n.serves(slot));
            agree &= owner.map(|n| n.id.as_str()) == Some(cluster.nodes[replica].id.as_str());
        }
        if agree {
            sc.note(&format!(
                "majority promoted node {replica} after {:.1} s",
                start.elapsed().as_secs_f64()
            ));
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Reservations of the hot SKU acknowledged so far (either api) whose record
/// the new primary lacks — read on that node directly, before the heal.
async fn lost_on_new_primary(sc: &Scenario, node: usize, loads: &[Load; 2]) -> Vec<(u64, String)> {
    let acked: BTreeSet<(u64, String)> = loads
        .iter()
        .flat_map(|l| l.answers_so_far())
        .filter(|a| a.accepted() && a.sku == HOT)
        .map(|a| (a.sku, a.rid))
        .collect();
    let acked: Vec<_> = acked.into_iter().collect();
    let mut conn = sc.stack.cluster().conn(node).await;
    let prefix = sc.stack.keys.reservation_prefix(stores::sku_id(HOT));
    let mut lost = Vec::new();
    for chunk in acked.chunks(500) {
        let mut pipe = redis::pipe();
        for (_, rid) in chunk {
            pipe.cmd("EXISTS").arg(format!("{prefix}{rid}"));
        }
        let exists: Vec<bool> = timed(pipe.query_async(&mut conn)).await;
        lost.extend(
            chunk
                .iter()
                .zip(exists)
                .filter(|(_, e)| !e)
                .map(|(id, _)| id.clone()),
        );
    }
    sc.note(&format!(
        "{} of {} acknowledged reservations of sku {HOT} have no record on the new primary",
        lost.len(),
        acked.len()
    ));
    lost
}

/// After the heal: converged, and the old primary is a replica of the new.
async fn rejoined_as_replica(sc: &mut Scenario, slot: u16, old: usize, new: usize) {
    let cluster = sc.stack.cluster();
    cluster.wait_converged("old primary rejoined").await;
    let (owner, replicas) = cluster.owners(slot).await;
    sc.expect(
        owner == new && replicas.contains(&old),
        format!(
            "node {old} rejoined as a replica of node {new} (slot {slot}: primary {owner}, replicas {replicas:?}): {}",
            cluster.describe().await
        ),
    );
}

/// Moments (ms since each load started: [minority api's, majority api's]).
struct Windows {
    cut: [u64; 2],
    promoted_at: [u64; 2],
    heal: [u64; 2],
}

/// Every answer within the documented bound of a reserve (one Redis call
/// plus the publish), before, during and after the partition, on both sides.
fn judge(sc: &mut Scenario, minority: &LoadReport, majority: &LoadReport, w: &Windows) {
    let bound_ms =
        partition::redis_call_ms(sc) + sc.stack.settings.amqp.publish_timeout_ms + MARGIN_MS;
    let reserve = Bound {
        op: Op::Reserve,
        bound_ms,
        statuses: &[200, 201, 202, 409, 503],
        expected: Some(503),
    };
    for (i, (side, report)) in [("minority api", minority), ("majority api", majority)]
        .into_iter()
        .enumerate()
    {
        let during = Window::new(&format!("{side}, partitioned"), w.cut[i], w.heal[i]);
        bounds::judge(sc, &report.answers, &during, &reserve);
        let all = Window::new(&format!("{side}, whole run"), 0, u64::MAX);
        let any = Bound {
            expected: None,
            ..reserve
        };
        bounds::judge(sc, &report.answers, &all, &any);
        let windows = [
            Window::new(&format!("{side} before"), 0, w.cut[i]),
            during,
            Window::new(&format!("{side} after"), w.heal[i], u64::MAX),
        ];
        bounds::print_slowest(sc, &report.answers, &windows);
    }
    sc.expect_sane_answers(minority);
    sc.expect_sane_answers(majority);
}

/// Queues drained, the repair, what became of each lost write, the counts
/// line, then the drain + audit of [`Scenario::finish`].
async fn settle_and_count(
    mut sc: Scenario,
    minority: &LoadReport,
    majority: &LoadReport,
    w: &Windows,
    lost: &[(u64, String)],
) {
    let all = LoadReport::merge(&[minority, majority]);
    let (in_mysql, acknowledged, _) = partition::settled_counts(&sc, &all).await;
    let first = reconcile::repair(&sc).await;
    sc.pause(1_500, 0).await;
    let second = reconcile::repair(&sc).await;
    let healthy = second
        .skus
        .iter()
        .all(|s| s.1 == "OK" || s.1 == "IN_FLIGHT");
    sc.expect(
        healthy,
        format!("after the repair every SKU is OK ({:?})", second.skus),
    );
    let fates = cluster::fates(&sc.stack, lost).await;
    println!(
        "  the {} lost acknowledged writes, by ledger status:",
        lost.len()
    );
    for (status, ids) in &fates {
        println!("    {status}: {} — {}", ids.len(), ids.join(" "));
    }
    let missing = stores::record_statuses(&sc.stack, lost).await;
    let missing = missing.values().filter(|s| s.is_none()).count();
    let oversold = cluster::oversold(&sc.stack).await;
    let rejected = cluster::rejected(&sc.stack).await;
    let counts: Vec<String> = fates
        .iter()
        .map(|(s, ids)| format!("{s} {}", ids.len()))
        .collect();
    println!(
        "[s21] counts: {}; lost acknowledged writes {} ({}), repaired: {}, records still missing {missing}; \
         rejected {rejected:?}; acknowledged {acknowledged}, in MySQL {in_mysql}; oversold {oversold}",
        window_counts(minority, majority, w),
        lost.len(),
        counts.join(", "),
        first.summary(),
    );
    expect_both_sides(&mut sc, minority, majority, w, lost.len());
    let no_row = fates.get("NO LEDGER ROW").map_or(0, Vec::len);
    sc.expect(
        no_row == 0,
        format!("every lost write has a ledger row ({no_row} without)"),
    );
    sc.expect(
        missing == 0,
        format!("every lost record rebuilt by the repair ({missing} missing)"),
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.finish(&all).await;
}

/// The hot SKU's answers on each side of the partition.
fn window_counts(minority: &LoadReport, majority: &LoadReport, w: &Windows) -> String {
    let min_cut = reserves_in(&minority.answers, HOT, w.cut[0], w.heal[0]);
    let last_ack = min_cut
        .iter()
        .filter(|a| matches!(a.status, 201 | 202))
        .map(|a: &&Answer| a.sent_ms)
        .max()
        .map_or(0, |ms| ms.saturating_sub(w.cut[0]));
    let maj_gap = reserves_in(&majority.answers, HOT, w.cut[1], w.promoted_at[1]);
    let maj_after = reserves_in(&majority.answers, HOT, w.promoted_at[1], w.heal[1]);
    format!(
        "minority api on sku {HOT} while partitioned: {} reserves, 201 {} (the last sent {:.1} s after the cut), 503 {}; \
         majority api on sku {HOT}: until the promotion ({:.1} s) 503 {} of {}, then until the heal {:?}",
        min_cut.len(),
        with_status(&min_cut, 201),
        last_ack as f64 / 1000.0,
        with_status(&min_cut, 503),
        w.promoted_at[1].saturating_sub(w.cut[1]) as f64 / 1000.0,
        with_status(&maj_gap, 503),
        maj_gap.len(),
        partition::statuses(&maj_after.into_iter().cloned().collect::<Vec<_>>()),
    )
}

/// The split brain happened: the minority primary acknowledged writes after
/// the cut and lost them; the majority served the slot after the promotion.
fn expect_both_sides(
    sc: &mut Scenario,
    minority: &LoadReport,
    majority: &LoadReport,
    w: &Windows,
    lost: usize,
) {
    let min_cut = reserves_in(&minority.answers, HOT, w.cut[0], w.heal[0]);
    let acked = with_status(&min_cut, 201);
    sc.expect(
        acked > 0 && lost > 0,
        format!(
            "the minority primary acknowledged {acked} new reservations after the cut; {lost} lost"
        ),
    );
    let maj_after = reserves_in(&majority.answers, HOT, w.promoted_at[1], u64::MAX);
    let created = with_status(&maj_after, 201);
    sc.expect(
        created > 0,
        format!("the majority api answered 201 on sku {HOT} after the promotion ({created})"),
    );
}
