//! Scenario 16: the hot SKU's slot is migrated to another primary under load
//! (`CLUSTER SETSLOT … IMPORTING / MIGRATING`, `MIGRATE` of its keys in
//! batches, `SETSLOT … NODE`). While keys move, the cluster answers ASK (key
//! already on the target) or TRYAGAIN (a script's keys split between the two
//! nodes); stockd's cluster client follows ASK and MOVED. No answer may be
//! wrong: no 5xx other than 503, nothing oversold, replays consistent (a
//! replayed id answers 200 with `Idempotent-Replayed`), audits clean.

use std::time::Duration;

use super::cluster::{self, reserves_in, with_status};
use super::{plan, Scenario};
use crate::load::{Load, LoadReport};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s16_cluster_slot_migration_under_load_gives_no_wrong_answer() {
    let mut sc = cluster::begin(
        "s16",
        "Redis Cluster: the hot SKU's slot migrated to another primary under load",
    )
    .await;
    let skus = [161, 162];
    let hot = skus[0];
    cluster::open(&mut sc, &skus).await;
    let (slot, from, _) = cluster::placement(&sc.stack, hot).await;
    let to = other_primary(&sc, from).await;
    let mut p = plan("s16", &skus, 400, 1500, 100);
    p.skus = vec![hot, hot, hot, skus[1]];
    let load = sc.load(p);
    sc.pause(4_000, 2_000).await;
    let migration = migrate(&mut sc, &load, hot, slot, (from, to)).await;
    let report = load.finish().await;

    let after = reserves_in(&report.answers, hot, migration.to_ms, u64::MAX);
    let created_after = with_status(&after, 201);
    sc.expect(
        created_after > 0,
        format!(
            "sku {hot}: 201 on the new owner after the migration ({created_after} of {})",
            after.len()
        ),
    );
    expect_no_second_take(&mut sc, &report);
    sc.expect_sane_answers(&report);
    print_counts(&mut sc, &report, hot, &migration).await;
    sc.finish(&report).await;
}

/// A primary other than `from` that serves slots: where the slot goes.
async fn other_primary(sc: &Scenario, from: usize) -> usize {
    let c = sc.stack.cluster();
    let view = c.view(from).await.expect("CLUSTER NODES");
    view.iter()
        .filter(|n| n.primary && !n.slots.is_empty())
        .filter_map(|n| c.index_of(&n.id))
        .find(|i| *i != from)
        .expect("another primary")
}

/// When (load ms) the keys moved, and how many.
struct Migration {
    from_ms: u64,
    to_ms: u64,
    moved: usize,
}

/// Migrates `slot` (the hot SKU's) between the nodes of `(from, to)` under
/// the load and waits until every node agrees on its new owner.
async fn migrate(
    sc: &mut Scenario,
    load: &Load,
    hot: u64,
    slot: u16,
    (from, to): (usize, usize),
) -> Migration {
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
    Migration {
        from_ms,
        to_ms,
        moved,
    }
}

/// A replay answers 200 + Idempotent-Replayed (or a refusal the first
/// attempt also got), never a second 201 for an id already accepted.
fn expect_no_second_take(sc: &mut Scenario, report: &LoadReport) {
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
}

/// The repair, the counts line, nothing oversold or rejected.
async fn print_counts(sc: &mut Scenario, report: &LoadReport, hot: u64, m: &Migration) {
    let during = reserves_in(&report.answers, hot, m.from_ms, m.to_ms);
    let (repair, rejected, oversold) = cluster::repair_and_count(sc).await;
    println!(
        "[s16] counts: acknowledged {} (sku {hot} during the {:.1} s migration: {} of {} answered 201, \
         {} 503), keys moved {}, lost by failover 0 (no failover), repaired {}, rejected {rejected:?}, \
         oversold {oversold}",
        report.accepted().len(),
        (m.to_ms - m.from_ms) as f64 / 1000.0,
        with_status(&during, 201),
        during.len(),
        with_status(&during, 503),
        m.moved,
        repair.summary()
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.expect(
        rejected.is_empty(),
        format!("no REJECTED ledger row ({rejected:?})"),
    );
}
