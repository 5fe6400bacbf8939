//! Scenario 13: Redis Cluster, kill -9 of the primary that owns the hot SKU's
//! slot under load. Its replica is promoted by the cluster itself
//! (`cluster-node-timeout` 1500 ms); reserves on that slot answer 503 for the
//! gap and 201 again once the replica serves it — without restarting stockd.
//! The other SKUs' slots keep serving. The killed node is restarted on its
//! data dir and rejoins as a replica. Every acknowledged reservation reaches
//! MySQL, nothing is oversold, the audits are clean.

use std::time::Duration;

use super::cluster::{self, reserves_in, with_status};
use super::{plan, Scenario};
use crate::load::{Load, LoadReport};
use crate::stores;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s13_cluster_primary_kill9_fails_over_without_restarting_stockd() {
    let mut sc = cluster::begin(
        "s13",
        "Redis Cluster: kill -9 of the hot SKU's primary under load, replica promoted",
    )
    .await;
    let skus = [131, 132, 133];
    let hot = skus[0];
    cluster::open(&mut sc, &skus).await;
    let (slot, primary, replica) = cluster::placement(&sc.stack, hot).await;
    let mut others_elsewhere = Vec::new();
    for sku in &skus[1..] {
        if cluster::placement(&sc.stack, *sku).await.1 != primary {
            others_elsewhere.push(*sku);
        }
    }
    let load = sc.load(plan("s13", &skus, 400, 1800, 100));
    sc.pause(4_000, 2_000).await;
    let gap = kill_primary(&mut sc, &load, hot, slot, (primary, replica)).await;
    let lost = lost_records(&sc, &load, hot, gap.down_ms).await;
    sc.pause(3_000, 1_000).await;
    cluster::rejoin(&mut sc, primary).await;
    let report = load.finish().await;
    let answered = judge_gap(&mut sc, &report, hot, &gap, &others_elsewhere);
    sc.expect_sane_answers(&report);

    let (repair, rejected, oversold) = cluster::repair_and_count(&sc).await;
    let acknowledged = report.accepted().len();
    println!(
        "[s13] counts: acknowledged {acknowledged} (sku {hot}: 503 in the {:.1} s gap {}, 201 after {}), \
         lost by failover {lost}, repaired {}, rejected {rejected:?}, oversold {oversold}",
        gap.secs(),
        answered.refused,
        answered.created,
        repair.summary()
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.finish(&report).await;
}

/// From the kill to the promotion, in load ms.
struct Gap {
    down_ms: u64,
    up_ms: u64,
}

impl Gap {
    fn secs(&self) -> f64 {
        (self.up_ms - self.down_ms) as f64 / 1000.0
    }
}

/// kill -9 of the slot's primary; waits for the cluster to promote its replica.
async fn kill_primary(
    sc: &mut Scenario,
    load: &Load,
    hot: u64,
    slot: u16,
    (primary, replica): (usize, usize),
) -> Gap {
    let port = sc.stack.cluster().nodes[primary].port;
    sc.note(&format!(
        "inject: kill -9 the primary of slot {slot} (sku {hot}): node {primary} :{port}"
    ));
    let down_ms = load.elapsed_ms();
    sc.stack.cluster_mut().kill9(primary);
    let promoted = sc
        .stack
        .cluster()
        .wait_primary(slot, replica, Duration::from_secs(20))
        .await;
    let up_ms = load.elapsed_ms();
    sc.expect(
        promoted.is_some(),
        format!("replica node {replica} promoted for slot {slot} ({promoted:?})"),
    );
    sc.note(&format!(
        "replica promoted after {:.1} s: {}",
        (up_ms - down_ms) as f64 / 1000.0,
        sc.stack.cluster().describe().await
    ));
    Gap { down_ms, up_ms }
}

/// Reservations of `hot` acknowledged before the kill whose record the
/// promoted replica lacks (asynchronous replication).
async fn lost_records(sc: &Scenario, load: &Load, hot: u64, down_ms: u64) -> usize {
    let before: Vec<(u64, String)> = load
        .answers_so_far()
        .iter()
        .filter(|a| a.accepted() && a.sku == hot && a.sent_ms < down_ms)
        .map(|a| (a.sku, a.rid.clone()))
        .collect();
    let records = stores::record_statuses(&sc.stack, &before).await;
    records.values().filter(|s| s.is_none()).count()
}

/// The hot SKU's reserves refused in the gap and created after it.
struct Answered {
    refused: usize,
    created: usize,
}

/// 503 for the hot SKU in the gap, 201 again after it from the same stockd
/// processes; what the SKUs on other primaries answered meanwhile.
fn judge_gap(
    sc: &mut Scenario,
    report: &LoadReport,
    hot: u64,
    gap: &Gap,
    others: &[u64],
) -> Answered {
    let (down_ms, up_ms) = (gap.down_ms, gap.up_ms);
    let in_gap = reserves_in(&report.answers, hot, down_ms, up_ms);
    let refused = with_status(&in_gap, 503);
    sc.expect(
        refused > 0,
        format!(
            "sku {hot}: reserves during the failover answered 503 ({refused} of {})",
            in_gap.len()
        ),
    );
    let after = reserves_in(&report.answers, hot, up_ms, u64::MAX);
    let created = with_status(&after, 201);
    sc.expect(
        created > 0,
        format!(
            "sku {hot}: reserves after the promotion answered 201 again, same stockd processes ({created} of {})",
            after.len()
        ),
    );
    for sku in others {
        let during = reserves_in(&report.answers, *sku, down_ms, up_ms);
        let ok = during.iter().filter(|a| a.status != 503).count();
        println!(
            "  sku {sku} (another primary) during the gap: {ok} of {} answered without 503",
            during.len()
        );
    }
    Answered { refused, created }
}
