//! Scenario 16: the hot SKU's slot is migrated to another primary under load
//! (`CLUSTER SETSLOT … IMPORTING / MIGRATING`, `MIGRATE` of its keys in
//! batches, `SETSLOT … NODE`). While keys move, the cluster answers ASK (key
//! already on the target) or TRYAGAIN (a script's keys split between the two
//! nodes); stockd's cluster client follows ASK and MOVED. No answer may be
//! wrong: no 5xx other than 503, nothing oversold, replays consistent (a
//! replayed id answers 200 with `Idempotent-Replayed`), audits clean.

use std::time::Duration;

use super::cluster::{self, reserves_in, with_status};
use super::{plan, reconcile};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s16_cluster_slot_migration_under_load_gives_no_wrong_answer() {
    let mut sc = cluster::begin(
        "s16",
        "Redis Cluster: the hot SKU's slot migrated to another primary under load",
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    let skus = [161, 162];
    let hot = skus[0];
    for sku in skus {
        sc.stack.create_sku(sku, 600, 2).await;
    }
    cluster::print_placement(&sc, &skus).await;
    let (slot, from, _) = cluster::placement(&sc.stack, hot).await;
    let to = {
        let c = sc.stack.cluster();
        let view = c.view(from).await.expect("CLUSTER NODES");
        view.iter()
            .filter(|n| n.primary && !n.slots.is_empty())
            .filter_map(|n| c.index_of(&n.id))
            .find(|i| *i != from)
            .expect("another primary")
    };
    let mut p = plan("s16", &skus, 400, 1500, 100);
    p.skus = vec![hot, hot, hot, skus[1]];
    let load = sc.load(p);
    sc.pause(4_000, 2_000).await;
    let (fport, tport) = {
        let c = sc.stack.cluster();
        (c.nodes[from].port, c.nodes[to].port)
    };
    sc.note(&format!(
        "inject: migrate slot {slot} (sku {hot}) from node {from} :{fport} to node {to} :{tport}"
    ));
    let from_ms = load.elapsed_ms();
    let moved = sc.stack.cluster().migrate_slot(slot, to).await;
    let to_ms = load.elapsed_ms();
    sc.note(&format!(
        "{moved} keys moved in {:.1} s",
        (to_ms - from_ms) as f64 / 1000.0
    ));
    let agreed = sc
        .stack
        .cluster()
        .wait_primary(slot, to, Duration::from_secs(20))
        .await;
    sc.expect(
        agreed.is_some(),
        format!("every node says node {to} owns slot {slot} ({agreed:?})"),
    );
    sc.note(&format!("cluster: {}", sc.stack.cluster().describe().await));
    let report = load.finish().await;

    let during = reserves_in(&report.answers, hot, from_ms, to_ms);
    let after = reserves_in(&report.answers, hot, to_ms, u64::MAX);
    let created_after = with_status(&after, 201);
    sc.expect(
        created_after > 0,
        format!(
            "sku {hot}: 201 on the new owner after the migration ({created_after} of {})",
            after.len()
        ),
    );
    // A replay answers 200 + Idempotent-Replayed (or a refusal the first
    // attempt also got), never a second 201 for an id already accepted.
    let mut first: std::collections::BTreeMap<(u64, String), u16> = Default::default();
    let mut twice = Vec::new();
    let mut answers: Vec<_> = report
        .answers
        .iter()
        .filter(|a| a.op == crate::load::Op::Reserve)
        .collect();
    answers.sort_by_key(|a| a.sent_ms + a.latency_ms);
    for a in answers {
        let key = (a.sku, a.rid.clone());
        match first.get(&key) {
            Some(201 | 202) if matches!(a.status, 201 | 202) => twice.push(a.rid.clone()),
            Some(200..=202) => {}
            _ => {
                first.insert(key, a.status);
            }
        }
    }
    sc.expect(
        twice.is_empty(),
        format!(
            "no request id acknowledged twice with 201/202 ({}: {:?})",
            twice.len(),
            twice.iter().take(5).collect::<Vec<_>>()
        ),
    );
    sc.expect_sane_answers(&report);

    sc.wait_queues_empty(std::time::Duration::from_secs(60))
        .await;
    let repair = reconcile::repair(&sc).await;
    let rejected = cluster::rejected(&sc.stack).await;
    let oversold = cluster::oversold(&sc.stack).await;
    println!(
        "[s16] counts: acknowledged {} (sku {hot} during the {:.1} s migration: {} of {} answered 201, \
         {} 503), keys moved {moved}, lost by failover 0 (no failover), repaired {}, rejected {rejected:?}, \
         oversold {oversold}",
        report.accepted().len(),
        (to_ms - from_ms) as f64 / 1000.0,
        with_status(&during, 201),
        during.len(),
        with_status(&during, 503),
        repair.summary()
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.expect(
        rejected.is_empty(),
        format!("no REJECTED ledger row ({rejected:?})"),
    );
    sc.finish(&report).await;
}
