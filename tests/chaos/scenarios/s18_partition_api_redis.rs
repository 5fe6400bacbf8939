//! Scenario 18: the api's link to Redis partitioned in the middle of
//! reservations (api and Redis each in a network namespace of their own;
//! nftables DROP rules inside the api's), 10 s in all, then healed:
//! - 4 s replies only (the api's requests reach Redis and are executed, the
//!   replies are lost): the api cannot know the outcome and answers 503;
//! - 6 s both directions (a connect times out, nothing is refused).
//!
//! Every reserve answers within one Redis call's bound
//! (`redis.connect_timeout_ms` plus `redis.command_timeout_ms`) with 503 while cut. After the heal the client
//! sends every refused reservation again with the same request id: one that
//! had been executed must replay (200), never take a second unit; one that had
//! not is taken now (201). Audit clean, 0 oversold, every acknowledged
//! reservation in MySQL.

use std::time::Duration;

use super::partition::{self, count};
use super::{metrics, partition_run, Scenario};
use crate::load::{LoadReport, Op};
use crate::net::Link;

const SKU: u64 = 181;
/// The replies-only half, then the full cut.
const REPLIES_LOST: Duration = Duration::from_secs(4);
const FULL_CUT: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s18_partition_api_redis() {
    let title = "api <-> Redis partitioned 10 s (replies lost, then both ways) under load";
    let mut sc = partition_run::begin("s18", title, &["api", "redis"], SKU).await;
    let redis = sc.stack.redis();
    let link = Link::to_server("api", redis.place.ip, redis.port);
    let steps = partition_run::replies_then_both(link, REPLIES_LOST, FULL_CUT);
    let p = partition_run::load_plan("s18", SKU, 720);
    let phases = partition_run::play(&mut sc, p, &steps).await;
    let answers = &phases.report.answers;
    // Reserves within one Redis call's bound (503 while cut); confirm and
    // cancel within the MySQL bound plus the Redis mirror's.
    let redis_ms = partition::redis_call_ms(&sc);
    let reserve = partition_run::reserve_bound(redis_ms, &[200, 201, 202, 409, 503], Some(503));
    let lifecycle_ms = partition::MYSQL_QUERY_TIMEOUT_MS + redis_ms;
    partition_run::judge_during(&mut sc, &phases, &reserve, lifecycle_ms);

    let (retries, all) = partition_run::settle(&mut sc, &phases).await;
    let during = phases.during.of(answers, Op::Reserve);
    let retried: Vec<_> = retries.answers.iter().collect();
    let (in_mysql, acknowledged, oversold) = partition::settled_counts(&sc, &all).await;
    let consumed = metrics::consumer_outcomes(&sc).await;
    println!(
        "[s18] counts: acknowledged {acknowledged}; during the 10 s cut {} reserves: 503 {}, 201 {}; \
         retried after the heal {}: replayed 200 {}, 201 {}, 409 {}, 503 {}; \
         consumer messages {consumed:?}; acknowledged in MySQL {in_mysql} of {acknowledged}; \
         oversold {oversold}",
        during.len(),
        count(&during, 503, None),
        count(&during, 201, None),
        retried.len(),
        count(&retried, 200, Some("replayed")),
        count(&retried, 201, None),
        count(&retried, 409, None),
        count(&retried, 503, None),
    );
    sc.expect(
        count(&during, 503, None) > 0,
        "reserves refused (503) while cut".into(),
    );
    expect_retries(&mut sc, &retried, &phases.report, &retries);
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.finish(&all).await;
}

/// After the heal no retry is refused, and some refused reservation replays:
/// its first attempt had run in Redis while its reply was lost. The replay
/// counts wherever it came (`partition::replayed_after_refusal`): in the
/// retries, or in the load itself when it sent that id again after the heal
/// (an id accepted there, replayed or not, is not retried).
fn expect_retries(
    sc: &mut Scenario,
    retried: &[&crate::load::Answer],
    load: &LoadReport,
    retries: &LoadReport,
) {
    sc.expect(
        count(retried, 503, None) == 0,
        "no retry after the heal refused".into(),
    );
    let replayed = partition::replayed_after_refusal(load, retries);
    sc.expect(
        !replayed.is_empty(),
        format!(
            "refused reservations that had run in Redis replay on a later attempt ({}: {})",
            replayed.len(),
            replayed.join(", ")
        ),
    );
}
