//! Scenario 14: a failover that loses acknowledged writes. The replica of the
//! hot SKU's primary is frozen (SIGSTOP) and its replication link dropped on
//! the primary (`CLIENT KILL TYPE replica`: what the primary writes from then
//! on cannot reach it, not even through the kernel's socket buffers); the
//! primary goes on acknowledging reservations; then it is killed (-9), the
//! replica continued (SIGCONT) and promoted with `CLUSTER FAILOVER TAKEOVER`.
//! The new primary lacks every write of the window: records, buyer counters,
//! winners, `available`.
//!
//! With `durability: queue` a 201 means the deduction is in the broker, so
//! every lost reservation still reaches MySQL; Redis shows more stock than the
//! truth (REDIS_AHEAD) and may admit what MySQL cannot cover: the consumer
//! turns that excess into `REJECTED` rows. `stockd reconcile --once --repair`
//! brings Redis down to the truth and rebuilds the lost records and counters
//! from MySQL. MySQL `available_stock` is sampled throughout and never < 0.

use std::time::Duration;

use super::cluster::{self, reserves_in, with_status, MinAvailable};
use super::{plan, reconcile, Scenario};
use crate::history::RedisLoss;
use crate::load::Load;
use crate::stores;

type Key = (u64, String);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s14_cluster_failover_to_a_stale_replica_is_repaired_and_never_oversells() {
    let mut sc = cluster::begin(
        "s14",
        "Redis Cluster: failover to a frozen replica loses acknowledged writes",
    )
    .await;
    let skus = [141, 142, 143];
    let hot = open(&mut sc, &skus).await;
    let min_available = MinAvailable::start(&sc.stack);
    let mut p = plan("s14", &skus, 300, 1800, 100);
    // Buyers come back to the hot SKU: lost counters let them past the limit.
    p.skus = vec![hot.sku, hot.sku, skus[1], skus[2]];
    let load = sc.load(p);
    sc.pause(3_000, 1_000).await;
    let window = fail_over_to_stale_replica(&mut sc, &hot, &load).await;
    let lost = count_lost(&mut sc, hot.sku, &load, &window).await;

    sc.pause(3_000, 1_000).await;
    cluster::rejoin(&mut sc, hot.primary).await;
    let report = load.finish().await;
    let after = reserves_in(&report.answers, hot.sku, window.up_ms, u64::MAX);
    let created_after = with_status(&after, 201);
    sc.expect(
        created_after > 0,
        format!(
            "sku {}: 201 again after the takeover ({created_after} of {})",
            hot.sku,
            after.len()
        ),
    );
    sc.expect_sane_answers(&report);
    let repaired = repair(&mut sc, &lost.ids).await;
    judge_repair(&mut sc, hot.sku, &window, &lost, &repaired, &min_available).await;
    drop(min_available);
    sc.finish(&report).await;
}

/// The hot SKU and where it lives.
struct Hot {
    sku: u64,
    slot: u16,
    primary: usize,
    replica: usize,
}

/// Every role running, the SKUs created (the first, hot one small), their
/// placement printed.
async fn open(sc: &mut Scenario, skus: &[u64]) -> Hot {
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    let hot = skus[0];
    // The hot SKU sells out during the run: what the stale replica admits
    // beyond the truth must be refused by MySQL, not oversold.
    sc.stack.create_sku(hot, 250, 2).await;
    for sku in &skus[1..] {
        sc.stack.create_sku(*sku, 600, 2).await;
    }
    cluster::print_placement(sc, skus).await;
    let (slot, primary, replica) = cluster::placement(&sc.stack, hot).await;
    Hot {
        sku: hot,
        slot,
        primary,
        replica,
    }
}

/// When (load ms) the primary acknowledged writes its replica never got,
/// and when the replica took over.
struct LossWindow {
    from_ms: u64,
    to_ms: u64,
    up_ms: u64,
}

impl LossWindow {
    fn secs(&self) -> f64 {
        (self.to_ms - self.from_ms) as f64 / 1000.0
    }
}

/// Freeze the replica and cut its link, let the primary acknowledge for a
/// while, kill it, thaw the replica and make it take over; declares the loss.
async fn fail_over_to_stale_replica(sc: &mut Scenario, hot: &Hot, load: &Load) -> LossWindow {
    let (slot, primary, replica) = (hot.slot, hot.primary, hot.replica);
    let (pport, rport) = {
        let c = sc.stack.cluster();
        (c.nodes[primary].port, c.nodes[replica].port)
    };
    sc.note(&format!(
        "inject: SIGSTOP replica node {replica} :{rport} of slot {slot} (sku {}), \
         CLIENT KILL TYPE replica on primary node {primary} :{pport}",
        hot.sku
    ));
    sc.stack.cluster_mut().freeze(replica);
    let dropped = sc.stack.cluster().drop_replica_links(primary).await;
    let from_ms = load.elapsed_ms();
    sc.note(&format!(
        "{dropped} replica link(s) dropped; the primary keeps acknowledging"
    ));
    sc.pause(3_000, 1_000).await;
    let to_ms = load.elapsed_ms();
    sc.note(&format!("inject: kill -9 primary node {primary} :{pport}"));
    let fault_from_ms = sc.history.now_ms();
    sc.stack.cluster_mut().kill9(primary);
    sc.note(&format!(
        "SIGCONT replica node {replica}; CLUSTER FAILOVER TAKEOVER"
    ));
    sc.stack.cluster_mut().thaw(replica);
    takeover(sc, replica).await;
    let promoted = sc
        .stack
        .cluster()
        .wait_primary(slot, replica, Duration::from_secs(20))
        .await;
    let up_ms = load.elapsed_ms();
    sc.expect(
        promoted.is_some(),
        format!("replica node {replica} took slot {slot} over ({promoted:?})"),
    );
    let takeover_what = format!("failover of slot {slot} to the stale replica node {replica}");
    sc.declare_redis_loss(RedisLoss::Stale, &takeover_what, fault_from_ms);
    sc.note(&format!("cluster: {}", sc.stack.cluster().describe().await));
    LossWindow {
        from_ms,
        to_ms,
        up_ms,
    }
}

/// The acknowledged writes the failover lost, and the window's answers.
struct Lost {
    ids: Vec<Key>,
    acked_in_window: usize,
    created_in_window: usize,
}

/// Acknowledged reservations of the hot SKU sent before the kill whose
/// record the new primary lacks: the acknowledged writes the failover lost.
/// Read at once, before any retry in the load could write them again.
async fn count_lost(sc: &mut Scenario, hot: u64, load: &Load, window: &LossWindow) -> Lost {
    let so_far = load.answers_so_far();
    let acked: Vec<Key> = so_far
        .iter()
        .filter(|a| a.accepted() && a.sku == hot && a.sent_ms < window.to_ms)
        .map(|a| (a.sku, a.rid.clone()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let records = stores::record_statuses(&sc.stack, &acked).await;
    let ids: Vec<Key> = records
        .iter()
        .filter(|(_, st)| st.is_none())
        .map(|(id, _)| id.clone())
        .collect();
    let in_window = reserves_in(&so_far, hot, window.from_ms, window.to_ms);
    // Acknowledged = answered 201 (or 202) to a new reservation; replays
    // (200) of earlier ids are counted apart.
    let acked_in_window = (in_window.iter())
        .filter(|a| matches!(a.status, 201 | 202))
        .count();
    let created_in_window = with_status(&in_window, 201);
    let replayed_in_window = with_status(&in_window, 200);
    sc.note(&format!(
        "window {:.1} s: {acked_in_window} acknowledged on sku {hot} ({created_in_window} 201, \
         {replayed_in_window} replays answered 200); \
         {} acknowledged reservations without a Redis record after the takeover",
        window.secs(),
        ids.len()
    ));
    sc.expect(
        !ids.is_empty(),
        format!(
            "the takeover lost acknowledged writes ({} of {})",
            ids.len(),
            acked.len()
        ),
    );
    Lost {
        ids,
        acked_in_window,
        created_in_window,
    }
}

/// The first repair's report, and how many lost records were still missing
/// before it.
struct Repaired {
    first: reconcile::Repair,
    missing_before: usize,
}

/// Queues empty, then `stockd reconcile --once --repair` twice: the second
/// must find every SKU healthy.
async fn repair(sc: &mut Scenario, lost: &[Key]) -> Repaired {
    sc.wait_queues_empty(std::time::Duration::from_secs(60))
        .await;
    // Lost records a retry in the load wrote again (Redis re-did the lost
    // write) are back already; the repair rebuilds the others from MySQL.
    let before_repair = stores::record_statuses(&sc.stack, lost).await;
    let missing_before = before_repair.values().filter(|s| s.is_none()).count();
    let first = reconcile::repair(sc).await;
    sc.pause(1_500, 0).await;
    let second = reconcile::repair(sc).await;
    let healthy = second
        .skus
        .iter()
        .all(|s| s.1 == "OK" || s.1 == "IN_FLIGHT");
    sc.expect(
        healthy,
        format!("after the repair every SKU is OK ({:?})", second.skus),
    );
    Repaired {
        first,
        missing_before,
    }
}

/// What became of each lost reservation, the counts line, and the
/// expectations on the repair's outcome.
async fn judge_repair(
    sc: &mut Scenario,
    hot: u64,
    window: &LossWindow,
    lost: &Lost,
    repaired: &Repaired,
    min_available: &MinAvailable,
) {
    let fate = cluster::fates(&sc.stack, &lost.ids).await;
    println!(
        "  the {} lost reservations, by ledger status:",
        lost.ids.len()
    );
    for (status, ids) in &fate {
        println!("    {status}: {} — {}", ids.len(), ids.join(" "));
    }
    let records_now = stores::record_statuses(&sc.stack, &lost.ids).await;
    let missing_after = records_now.values().filter(|s| s.is_none()).count();
    let rebuilt = repaired.missing_before - missing_after;
    let rejected = cluster::rejected(&sc.stack).await;
    let rejected_total: usize = rejected.values().sum();
    let oversold = cluster::oversold(&sc.stack).await;
    let min_seen = min_available.min();
    println!(
        "[s14] counts: acknowledged {} (new reservations answered 201/202 on sku {hot} \
         in the {:.1} s window, {} of them 201), lost by failover {}, repaired: {} — \
         {rebuilt} lost records rebuilt from MySQL ({} rewritten earlier by retries, {missing_after} \
         still missing), rejected {rejected_total} {rejected:?}, oversold {oversold}, \
         lowest MySQL available_stock seen {min_seen}",
        lost.acked_in_window,
        window.secs(),
        lost.created_in_window,
        lost.ids.len(),
        repaired.first.summary(),
        lost.ids.len() - repaired.missing_before,
    );
    sc.expect(
        missing_after == 0,
        format!("every lost record is back in Redis after the repair ({missing_after} missing)"),
    );
    let no_row = fate.get("NO LEDGER ROW").map_or(0, Vec::len);
    sc.expect(
        no_row == 0,
        format!("every lost reservation has a ledger row ({no_row} without)"),
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.expect(
        min_seen >= 0,
        format!("MySQL available_stock never below 0 (lowest {min_seen})"),
    );
}

/// `CLUSTER FAILOVER TAKEOVER` on the thawed replica, retried while it is
/// still catching up with its event loop; fine if it already promoted itself.
async fn takeover(sc: &Scenario, replica: usize) {
    let cluster = sc.stack.cluster();
    for attempt in 1..=20 {
        let reply = cluster.failover_takeover(replica).await;
        match reply {
            Ok(ok) => {
                sc.note(&format!(
                    "CLUSTER FAILOVER TAKEOVER -> {ok} (attempt {attempt})"
                ));
                return;
            }
            Err(err) if err.to_string().contains("master") => {
                sc.note(&format!("replica already promoted itself: {err}"));
                return;
            }
            Err(err) => {
                sc.note(&format!("CLUSTER FAILOVER TAKEOVER: {err}; again"));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
