//! Scenario 12: Redis reaches `maxmemory` (noeviction) under load. The reserve
//! script starts with `#!lua`, so Redis refuses it whole: reservations answer
//! 503 and nothing is half-written. After maxmemory is lifted and the pipeline
//! drained, the audit is clean.

use super::{open_load, Scenario};
use crate::load::Op;

/// Headroom above the memory in use when the limit is set, bytes.
const HEADROOM: u64 = 16 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s12_redis_maxmemory_refuses_reserves_whole() {
    let mut sc = Scenario::begin("s12", "Redis maxmemory reached under load", &[]).await;
    // Buyers, requests, per second.
    let traffic = (600, 1_500, 100);
    let load = open_load(&mut sc, &[121, 122], (800, 2), traffic, (3_000, 1_000)).await;
    let used = sc.stack.redis().used_memory().await;
    sc.note(&format!(
        "inject: CONFIG SET maxmemory {} (used {used} + {HEADROOM})",
        used + HEADROOM
    ));
    let from_ms = load.elapsed_ms();
    sc.stack.redis().set_maxmemory(used + HEADROOM).await;
    sc.pause(5_000, 2_000).await;
    sc.note("CONFIG SET maxmemory 0");
    sc.stack.redis().set_maxmemory(0).await;
    let to_ms = load.elapsed_ms();
    let report = load.finish().await;
    let refused = report
        .answers
        .iter()
        .filter(|a| {
            a.op == Op::Reserve && a.status == 503 && a.sent_ms >= from_ms && a.sent_ms < to_ms
        })
        .count();
    sc.expect(
        refused > 0,
        format!("reservations refused with 503 while Redis was full ({refused})"),
    );
    sc.expect_sane_answers(&report);
    sc.finish(&report).await;
}
