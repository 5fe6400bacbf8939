//! Scenario 3: Redis comes back from an older snapshot — a failover to a
//! replica that lost acknowledged writes — with `durability: redis` (201
//! straight after the script). `stockd reconcile --once --repair` must bring
//! Redis back to the truth; MySQL must never hold a buyer over the limit nor a
//! request id twice. Plus the exact case with limit 1 and buyer 7, in both
//! orders (new request first, retry first).

use std::time::Duration;

use super::{plan, reconcile, Scenario};
use crate::history::RedisLoss;
use crate::load::{Answer, LoadReport, Op};
use crate::stores;

/// A scenario with `durability: redis` (201 straight after the script).
async fn begin(name: &str, title: &str) -> Scenario {
    let extra = [("STOCKD__RESERVATION__DURABILITY", "redis".to_string())];
    Scenario::begin(name, title, &extra).await
}

/// `stockd reconcile --once --repair` twice, `pause_ms` after each.
async fn repair_twice(sc: &mut Scenario, pause_ms: u64) {
    for _ in 0..2 {
        reconcile::repair(sc).await;
        sc.pause(pause_ms, 0).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s03_redis_rollback_to_a_snapshot_is_repaired_without_over_limit() {
    let title =
        "Redis restored from an older snapshot (lost acknowledged writes), durability redis";
    let mut sc = begin("s03", title).await;
    let skus = [31, 32];
    sc.open_skus(&skus, 500, 2).await;
    let load = sc.load(plan("s03", &skus, 300, 1500, 100));
    sc.pause(4_000, 2_000).await;
    sc.note("snapshot: SAVE + copy dump.rdb");
    let snapshot = sc.stack.redis().snapshot("before").await;
    let at_snapshot = load.accepted_count();
    sc.pause(4_000, 2_000).await;
    let lost = load.accepted_count() - at_snapshot;
    sc.note(&format!(
        "inject: kill -9 redis-server, restart from the snapshot ({lost} acknowledged reservations after it are lost)"
    ));
    let fault_from_ms = sc.history.now_ms();
    sc.stack.redis_mut().restore(&snapshot).await;
    let rollback = "Redis restarted from an older snapshot";
    sc.declare_redis_loss(RedisLoss::Stale, rollback, fault_from_ms);
    let report = load.finish().await;
    sc.pause(2_000, 0).await;
    repair_twice(&mut sc, 1_500).await;
    sc.expect_sane_answers(&report);
    sc.finish(&report).await;
}

/// s03b's SKUs: on 33 the new request b comes first, then the retry of a;
/// on 34 the other order.
const SKUS_B: [u64; 2] = [33, 34];
/// s03b's buyer.
const BUYER: u64 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s03b_rolled_back_buyer_cannot_exceed_limit_and_retry_replays() {
    let title = "limit 1: buyer 7's reservation lost by a Redis rollback, then new request / retry";
    let mut sc = begin("s03b", title).await;
    sc.open_skus(&SKUS_B, 10, 1).await;
    reserve_a_then_roll_back(&mut sc).await;
    let admitted_b = new_request_and_retry(&mut sc).await;
    expect_ledger_holds_a_only(&mut sc).await;
    repair_twice(&mut sc, 1_000).await;
    let mut accepted: Vec<Answer> = SKUS_B
        .iter()
        .map(|sku| answer(*sku, &format!("a{sku}"), 201, ""))
        .collect();
    accepted.extend(admitted_b);
    sc.finish(&LoadReport::new("s03b", accepted)).await;
}

/// A reserve answer of buyer [`BUYER`] for one unit, as the load records it.
fn answer(sku: u64, rid: &str, status: u16, code: &str) -> Answer {
    Answer {
        op: Op::Reserve,
        sku,
        rid: rid.to_string(),
        user: BUYER,
        count: 1,
        status,
        code: code.to_string(),
        sent_ms: 0,
        latency_ms: 0,
    }
}

/// Snapshot, reservation a on each SKU (201, applied in MySQL), then Redis
/// restored from the snapshot (a is gone from it) and repaired twice.
async fn reserve_a_then_roll_back(sc: &mut Scenario) {
    let snapshot = sc.stack.redis().snapshot("before-a").await;
    for sku in SKUS_B {
        let a = sc.reserve(sku, &format!("a{sku}"), BUYER, 1).await;
        sc.expect(
            a.status == 201,
            format!("sku {sku}: a answered 201 (got {})", a.status),
        );
    }
    let stack = &sc.stack;
    sc.wait_for(
        "a33 and a34 applied in MySQL",
        Duration::from_secs(30),
        || async {
            stores::ledger_status(stack, 33, "a33").await.as_deref() == Some("RESERVED")
                && stores::ledger_status(stack, 34, "a34").await.as_deref() == Some("RESERVED")
        },
    )
    .await;
    sc.note("inject: restore Redis from the snapshot taken before a");
    let fault_from_ms = sc.history.now_ms();
    sc.stack.redis_mut().restore(&snapshot).await;
    let rollback = "Redis restored from the snapshot taken before a";
    sc.declare_redis_loss(RedisLoss::Stale, rollback, fault_from_ms);
    repair_twice(sc, 1_000).await;
}

/// The new request b and the retry of a, in both orders: a replays; b is
/// refused LIMIT_EXCEEDED or, admitted by Redis, returned (the consumer
/// must refuse it in MySQL).
async fn new_request_and_retry(sc: &mut Scenario) -> Vec<Answer> {
    let b33 = sc.reserve(33, "b33", BUYER, 1).await;
    let a33 = sc.reserve(33, "a33", BUYER, 1).await;
    let a34 = sc.reserve(34, "a34", BUYER, 1).await;
    let b34 = sc.reserve(34, "b34", BUYER, 1).await;
    for (sku, a) in [(33, &a33), (34, &a34)] {
        sc.expect(
            a.status == 200 && a.replayed,
            format!(
                "sku {sku}: retry of a answers 200 replayed (got {} {} replayed={})",
                a.status, a.code, a.replayed
            ),
        );
    }
    let mut admitted = Vec::new();
    for (sku, b) in [(33, &b33), (34, &b34)] {
        if b.status == 409 {
            sc.expect(
                b.code == "LIMIT_EXCEEDED",
                format!("sku {sku}: b refused with {}", b.code),
            );
        } else {
            admitted.push(answer(sku, &format!("b{sku}"), b.status, &b.code));
        }
    }
    admitted
}

/// Once the queues are empty: b is not live in MySQL, a still RESERVED.
async fn expect_ledger_holds_a_only(sc: &mut Scenario) {
    sc.wait_queues_empty(Duration::from_secs(30)).await;
    sc.pause(1_000, 0).await;
    for sku in SKUS_B {
        let b = stores::ledger_status(&sc.stack, sku, &format!("b{sku}")).await;
        let live = b.as_deref().is_some_and(|s| stores::LIVE.contains(&s));
        sc.expect(
            !live,
            format!("sku {sku}: b is not live in MySQL (ledger {b:?})"),
        );
        let a = stores::ledger_status(&sc.stack, sku, &format!("a{sku}")).await;
        sc.expect(
            a.as_deref() == Some("RESERVED"),
            format!("sku {sku}: a still RESERVED in MySQL ({a:?})"),
        );
    }
}
