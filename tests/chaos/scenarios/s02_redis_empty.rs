//! Scenario 2: Redis restarts EMPTY (data lost) under load. Reservations are
//! refused with 503 (SKU not loaded) until `stockd warmup` rebuilds the
//! admission state from MySQL; after it a buyer at the limit is refused and a
//! retry of an accepted request id is an idempotent replay.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{plan, Scenario};
use crate::history::RedisLoss;
use crate::load::LoadReport;
use crate::stores;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s02_redis_restarted_empty_then_warmup_keeps_limits_and_replays() {
    let mut sc = Scenario::begin("s02", "Redis restarted empty, warm-up from MySQL", &[]).await;
    let skus = [21, 22];
    sc.open_skus(&skus, 400, 2).await;
    let load = sc.load(plan("s02a", &skus, 250, 900, 100));
    sc.pause(4_000, 2_000).await;
    sc.note("inject: kill -9 redis-server, delete its data, start it empty");
    let fault_from_ms = sc.history.now_ms();
    sc.stack.redis_mut().restart_empty().await;
    sc.declare_redis_loss(RedisLoss::Emptied, "Redis restarted empty", fault_from_ms);
    let before = load.finish().await;

    let probe = sc.reserve(skus[0], "s02-probe", 9_999, 1).await;
    sc.expect(
        probe.status == 503,
        format!(
            "a reserve on the empty Redis answers 503 (got {} {})",
            probe.status, probe.code
        ),
    );
    let queues = stores::work_queues(&sc.stack);
    let stack = &sc.stack;
    sc.wait_for("work queues drained", Duration::from_secs(60), || async {
        let ready = stores::ready_counts(stack, &queues).await;
        ready.iter().all(|(_, n)| *n == Some(0))
    })
    .await;
    sc.pause(1_000, 0).await;
    sc.note("stockd warmup --sku 21 --sku 22");
    let warm = sc
        .stack
        .cli(&["warmup", "--sku", "21", "--sku", "22"])
        .await;
    print!("{}", warm.text());
    sc.expect(
        warm.code == Some(0),
        format!("warmup exit code {:?}", warm.code),
    );

    check_limits_and_replays(&mut sc, &before, skus[0]).await;
    let after = sc.load(plan("s02b", &skus, 250, 300, 100)).finish().await;
    sc.expect_sane_answers(&after);
    sc.finish(&LoadReport::merge(&[&before, &after])).await;
}

/// Up to 3 buyers at their limit get 409 LIMIT_EXCEEDED; up to 3 live
/// accepted request ids answer 200 with `Idempotent-Replayed: true`.
async fn check_limits_and_replays(sc: &mut Scenario, before: &LoadReport, sku: u64) {
    let ledger = stores::ledger(&sc.stack).await;
    let limit = stores::sku_rows(&sc.stack)
        .await
        .iter()
        .find(|s| s.sku == sku)
        .map(|s| s.limit)
        .unwrap();
    let mut units: BTreeMap<u64, i64> = BTreeMap::new();
    for row in ledger.iter().filter(|r| r.sku == sku && r.live()) {
        *units.entry(row.user).or_default() += row.count;
    }
    let full: Vec<u64> = units
        .iter()
        .filter(|(_, n)| **n >= limit)
        .map(|(u, _)| *u)
        .take(3)
        .collect();
    sc.expect(
        !full.is_empty(),
        format!("buyers at the limit on sku {sku}: {full:?}"),
    );
    for user in full {
        let reply = sc.reserve(sku, &format!("s02-over-{user}"), user, 1).await;
        sc.expect(
            reply.status == 409 && reply.code == "LIMIT_EXCEEDED",
            format!(
                "buyer {user} at the limit: 409 LIMIT_EXCEEDED (got {} {})",
                reply.status, reply.code
            ),
        );
    }
    let accepted = before.accepted();
    let live: Vec<_> = ledger
        .iter()
        .filter(|r| r.sku == sku && r.status == "RESERVED")
        .filter_map(|r| {
            accepted
                .get(&(r.sku, r.rid.clone()))
                .map(|(u, c)| (r.rid.clone(), *u, *c))
        })
        .take(3)
        .collect();
    sc.expect(
        !live.is_empty(),
        format!("accepted live reservations to replay: {}", live.len()),
    );
    for (rid, user, count) in live {
        let reply = sc.reserve(sku, &rid, user, count).await;
        sc.expect(
            reply.status == 200 && reply.replayed,
            format!(
                "retry of accepted {rid}: 200 replayed (got {} {} replayed={})",
                reply.status, reply.code, reply.replayed
            ),
        );
    }
}
