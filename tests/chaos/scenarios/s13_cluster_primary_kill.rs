//! Scenario 13: Redis Cluster, kill -9 of the primary that owns the hot SKU's
//! slot under load. Its replica is promoted by the cluster itself
//! (`cluster-node-timeout` 1500 ms); reserves on that slot answer 503 for the
//! gap and 201 again once the replica serves it — without restarting stockd.
//! The other SKUs' slots keep serving. The killed node is restarted on its
//! data dir and rejoins as a replica. Every acknowledged reservation reaches
//! MySQL, nothing is oversold, the audits are clean.

use std::time::Duration;

use super::cluster::{self, reserves_in, with_status};
use super::{plan, reconcile};
use crate::stores;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s13_cluster_primary_kill9_fails_over_without_restarting_stockd() {
    let mut sc = cluster::begin(
        "s13",
        "Redis Cluster: kill -9 of the hot SKU's primary under load, replica promoted",
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    let skus = [131, 132, 133];
    let hot = skus[0];
    for sku in skus {
        sc.stack.create_sku(sku, 600, 2).await;
    }
    cluster::print_placement(&sc, &skus).await;
    let (slot, primary, replica) = cluster::placement(&sc.stack, hot).await;
    let mut others_elsewhere = Vec::new();
    for sku in &skus[1..] {
        if cluster::placement(&sc.stack, *sku).await.1 != primary {
            others_elsewhere.push(*sku);
        }
    }
    let load = sc.load(plan("s13", &skus, 400, 1800, 100));
    sc.pause(4_000, 2_000).await;
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
    // Reservations acknowledged before the kill whose record the promoted
    // replica lacks (asynchronous replication).
    let before: Vec<(u64, String)> = load
        .answers_so_far()
        .iter()
        .filter(|a| a.accepted() && a.sku == hot && a.sent_ms < down_ms)
        .map(|a| (a.sku, a.rid.clone()))
        .collect();
    let records = stores::record_statuses(&sc.stack, &before).await;
    let lost = records.values().filter(|s| s.is_none()).count();
    sc.pause(3_000, 1_000).await;
    cluster::rejoin(&mut sc, primary).await;
    let report = load.finish().await;

    let gap = reserves_in(&report.answers, hot, down_ms, up_ms);
    let refused = with_status(&gap, 503);
    sc.expect(
        refused > 0,
        format!(
            "sku {hot}: reserves during the failover answered 503 ({refused} of {})",
            gap.len()
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
    for sku in &others_elsewhere {
        let during = reserves_in(&report.answers, *sku, down_ms, up_ms);
        let ok = during.iter().filter(|a| a.status != 503).count();
        println!(
            "  sku {sku} (another primary) during the gap: {ok} of {} answered without 503",
            during.len()
        );
    }
    sc.expect_sane_answers(&report);

    sc.wait_queues_empty(std::time::Duration::from_secs(60))
        .await;
    let repair = reconcile::repair(&sc).await;
    let rejected = cluster::rejected(&sc.stack).await;
    let oversold = cluster::oversold(&sc.stack).await;
    let acknowledged = report.accepted().len();
    println!(
        "[s13] counts: acknowledged {acknowledged} (sku {hot}: 503 in the {:.1} s gap {refused}, 201 after {created}), \
         lost by failover {lost}, repaired {}, rejected {rejected:?}, oversold {oversold}",
        (up_ms - down_ms) as f64 / 1000.0,
        repair.summary()
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.finish(&report).await;
}
