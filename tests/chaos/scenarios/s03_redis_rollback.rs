//! Scenario 3: Redis comes back from an older snapshot — a failover to a
//! replica that lost acknowledged writes — with `durability: redis` (201
//! straight after the script). `stockd reconcile --once --repair` must bring
//! Redis back to the truth; MySQL must never hold a buyer over the limit nor a
//! request id twice. Plus the exact case with limit 1 and buyer 7, in both
//! orders (new request first, retry first).

use std::time::Duration;

use super::{plan, reconcile, Scenario};
use crate::history::RedisLoss;
use crate::load::LoadReport;
use crate::stores;

fn redis_durability() -> Vec<(&'static str, String)> {
    vec![("STOCKD__RESERVATION__DURABILITY", "redis".to_string())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s03_redis_rollback_to_a_snapshot_is_repaired_without_over_limit() {
    let mut sc = Scenario::begin(
        "s03",
        "Redis restored from an older snapshot (lost acknowledged writes), durability redis",
        &redis_durability(),
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    let skus = [31, 32];
    for sku in skus {
        sc.stack.create_sku(sku, 500, 2).await;
    }
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
    for _ in 0..2 {
        reconcile::repair(&sc).await;
        sc.pause(1_500, 0).await;
    }
    sc.expect_sane_answers(&report);
    sc.finish(&report).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s03b_rolled_back_buyer_cannot_exceed_limit_and_retry_replays() {
    let mut sc = Scenario::begin(
        "s03b",
        "limit 1: buyer 7's reservation lost by a Redis rollback, then new request / retry",
        &redis_durability(),
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    // sku 33: new request b first, then the retry of a; sku 34: the other order.
    for sku in [33, 34] {
        sc.stack.create_sku(sku, 10, 1).await;
    }
    let snapshot = sc.stack.redis().snapshot("before-a").await;
    for sku in [33, 34] {
        let a = sc.reserve(sku, &format!("a{sku}"), 7, 1).await;
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
    for _ in 0..2 {
        reconcile::repair(&sc).await;
        sc.pause(1_000, 0).await;
    }

    let b33 = sc.reserve(33, "b33", 7, 1).await;
    let a33 = sc.reserve(33, "a33", 7, 1).await;
    let a34 = sc.reserve(34, "a34", 7, 1).await;
    let b34 = sc.reserve(34, "b34", 7, 1).await;
    for (sku, a) in [(33, &a33), (34, &a34)] {
        sc.expect(
            a.status == 200 && a.replayed,
            format!(
                "sku {sku}: retry of a answers 200 replayed (got {} {} replayed={})",
                a.status, a.code, a.replayed
            ),
        );
    }
    let mut report = Vec::new();
    for (sku, b) in [(33, &b33), (34, &b34)] {
        if b.status == 409 {
            sc.expect(
                b.code == "LIMIT_EXCEEDED",
                format!("sku {sku}: b refused with {}", b.code),
            );
        } else {
            // Admitted by Redis: the consumer must refuse it in MySQL.
            report.push(crate::load::Answer {
                op: crate::load::Op::Reserve,
                sku,
                rid: format!("b{sku}"),
                user: 7,
                count: 1,
                status: b.status,
                code: b.code.clone(),
                sent_ms: 0,
                latency_ms: 0,
            });
        }
    }
    sc.wait_queues_empty(Duration::from_secs(30)).await;
    sc.pause(1_000, 0).await;
    for sku in [33, 34] {
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
    for _ in 0..2 {
        reconcile::repair(&sc).await;
        sc.pause(1_000, 0).await;
    }
    let mut accepted = vec![];
    for sku in [33, 34] {
        accepted.push(crate::load::Answer {
            op: crate::load::Op::Reserve,
            sku,
            rid: format!("a{sku}"),
            user: 7,
            count: 1,
            status: 201,
            code: String::new(),
            sent_ms: 0,
            latency_ms: 0,
        });
    }
    accepted.extend(report);
    sc.finish(&LoadReport::new("s03b", accepted)).await;
}
