//! Scenario 22: a flapping link — 30 % of the packets between the api and
//! Redis dropped at random (each direction, nftables `numgen random`) for
//! 20 s under load. TCP retransmits what it can; a reply that comes too late
//! is a 503 whose reservation may have been executed. Every reserve answers
//! within one Redis call's bound; after the heal every refused reservation is
//! sent again with the same request id and replays (200) or is taken once
//! (201). Audit clean, 0 oversold, every acknowledged reservation in MySQL.

use std::time::Duration;

use super::partition::{self, count, Fault, Step};
use super::{metrics, partition_run};
use crate::load::Op;
use crate::net::Link;

const SKU: u64 = 221;
const FLAP: Duration = Duration::from_secs(20);
/// Share of packets dropped, each direction.
const LOSS_PERCENT: u8 = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s22_flapping_redis_link() {
    let title = "api <-> Redis link losing 30 % of its packets for 20 s under load";
    let mut sc = partition_run::begin("s22", title, &["api", "redis"], SKU).await;
    let redis = sc.stack.redis();
    let steps = [Step {
        links: vec![Link::to_server("api", redis.place.ip, redis.port)],
        fault: Fault::Flap(LOSS_PERCENT),
        length: FLAP,
    }];
    let p = partition_run::load_plan("s22", SKU, 1_000);
    let phases = partition_run::play(&mut sc, p, &steps).await;
    let answers = &phases.report.answers;
    let redis_ms = partition::redis_call_ms(&sc);
    let reserve = partition_run::reserve_bound(redis_ms, &[200, 201, 202, 409, 503], None);
    let lifecycle_ms = partition::MYSQL_QUERY_TIMEOUT_MS + redis_ms;
    partition_run::judge_during(&mut sc, &phases, &reserve, lifecycle_ms);

    let (retries, all) = partition_run::settle(&mut sc, &phases).await;
    let during = phases.during.of(answers, Op::Reserve);
    let retried: Vec<_> = retries.answers.iter().collect();
    let (in_mysql, acknowledged, oversold) = partition::settled_counts(&sc, &all).await;
    let consumed = metrics::consumer_outcomes(&sc).await;
    println!(
        "[s22] counts: acknowledged {acknowledged}; during the 20 s flap {} reserves: 201 {}, 503 {}, \
         200 replayed {}; retried after the heal {}: replayed 200 {}, 201 {}, 409 {}, 503 {}; \
         consumer messages {consumed:?}; acknowledged in MySQL {in_mysql} of {acknowledged}; \
         oversold {oversold}",
        during.len(),
        count(&during, 201, None),
        count(&during, 503, None),
        count(&during, 200, Some("replayed")),
        retried.len(),
        count(&retried, 200, Some("replayed")),
        count(&retried, 201, None),
        count(&retried, 409, None),
        count(&retried, 503, None),
    );
    sc.expect(
        count(&retried, 503, None) == 0,
        "no retry after the heal refused".into(),
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.finish(&all).await;
}
