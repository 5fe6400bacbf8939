//! Scenario 1: Redis is killed with SIGKILL under load and restarted on its
//! AOF (`appendfsync always`): every acknowledged write survives, so nothing
//! may be lost or taken twice.

use super::{open_load, Scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s01_redis_kill9_and_aof_restart_lose_nothing() {
    let mut sc = Scenario::begin("s01", "Redis kill -9 and restart with AOF under load", &[]).await;
    // (base, jitter) ms before the fault; buyers, requests, per second.
    let lead = (4_000, 2_000);
    let traffic = (400, 1500, 100);
    let load = open_load(&mut sc, &[11, 12], (600, 2), traffic, lead).await;
    let down_ms = sc.inject(&load, "kill -9 redis-server", |s| s.redis_mut().kill9());
    sc.pause(2_000, 1_000).await;
    sc.note("restart redis-server on its AOF");
    sc.stack.redis_mut().restart().await;
    let up_ms = load.elapsed_ms();
    let report = load.finish().await;
    let during: Vec<_> = report
        .answers
        .iter()
        .filter(|a| a.sent_ms >= down_ms && a.sent_ms < up_ms)
        .collect();
    let refused = during.iter().filter(|a| a.status == 503).count();
    sc.expect(
        refused > 0,
        format!(
            "reserves during the outage answered 503 ({refused} of {})",
            during.len()
        ),
    );
    sc.expect_sane_answers(&report);
    sc.finish(&report).await;
}
