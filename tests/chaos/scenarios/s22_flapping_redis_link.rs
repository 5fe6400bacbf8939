//! Scenario 22: a flapping link — 30 % of the packets between the api and
//! Redis dropped at random (each direction, nftables `numgen random`) for
//! 20 s under load. TCP retransmits what it can; a reply that comes too late
//! is a 503 whose reservation may have been executed. Every reserve answers
//! within one Redis call's bound; after the heal every refused reservation is
//! sent again with the same request id and replays (200) or is taken once
//! (201). Audit clean, 0 oversold, every acknowledged reservation in MySQL.

use std::time::Duration;

use super::bounds::{self, Bound, MARGIN_MS};
use super::partition::{self, count, Fault, Step};
use super::{metrics, plan, Scenario};
use crate::load::{LoadReport, Op};
use crate::net::Link;
use crate::stack::RedisSetup;

const SKU: u64 = 221;
const FLAP: Duration = Duration::from_secs(20);
/// Share of packets dropped, each direction.
const LOSS_PERCENT: u8 = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s22_flapping_redis_link() {
    let mut sc = Scenario::begin_net(
        "s22",
        "api <-> Redis link losing 30 % of its packets for 20 s under load",
        &partition::settings(),
        RedisSetup::Standalone,
        &["api", "redis"],
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    sc.stack.create_sku(SKU, 3_000, 3).await;
    let redis = sc.stack.redis();
    let steps = [Step {
        links: vec![Link::to_server("api", redis.place.ip, redis.port)],
        fault: Fault::Flap(LOSS_PERCENT),
        length: FLAP,
    }];
    let mut p = plan("s22", &[SKU], 1_500, 1_000, 40);
    p.concurrency = 24;
    let base = sc.stack.base.clone();
    let phases = partition::under_load(&mut sc, &base, p, 3_000, &steps).await;
    let answers = &phases.report.answers;
    let redis_ms = partition::redis_call_ms(&sc);
    let reserve = Bound {
        op: Op::Reserve,
        bound_ms: redis_ms + MARGIN_MS,
        statuses: &[200, 201, 202, 409, 503],
        expected: None,
    };
    bounds::judge(&mut sc, answers, &phases.during, &reserve);
    for op in [Op::Confirm, Op::Cancel] {
        let bound = Bound {
            op,
            bound_ms: partition::MYSQL_QUERY_TIMEOUT_MS + redis_ms + MARGIN_MS,
            statuses: &[200, 409, 503],
            expected: None,
        };
        partition::judge_if_any(&mut sc, answers, &phases.during, &bound);
    }
    bounds::print_slowest(&sc, answers, &phases.windows());

    let retries = partition::retry_refused(&sc, &base, &phases.report).await;
    let all = LoadReport::merge(&[&phases.report, &retries]);
    partition::judge_whole_run(&mut sc, &all.answers);
    sc.expect_sane_answers(&phases.report);
    partition::expect_single_take(&mut sc, &all.answers);
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
