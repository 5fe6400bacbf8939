//! Scenario 19: the api's link to the broker partitioned with publisher
//! confirms in flight (the api in a network namespace of its own, the broker
//! on the root-side veth's address), 10 s in all, then healed:
//! - 4 s confirms lost (what the api publishes reaches the broker and is
//!   queued, the confirms never come back);
//! - 6 s both directions.
//!
//! Every reserve answers within `amqp.publish_timeout_ms` (+ the Redis call)
//! with 202 while cut — the reservation stands in Redis and its outbox entry
//! is published by the relay once the link is back. A message whose confirm
//! was lost is in the queue *and* in the outbox: the relay publishes it again
//! and the consumer's ledger skips the duplicate. Audit clean, 0 oversold,
//! every acknowledged reservation in MySQL exactly once.

use std::collections::BTreeMap;
use std::time::Duration;

use super::bounds::{self, Bound, MARGIN_MS};
use super::partition::{self, count, Fault, Step};
use super::{metrics, plan, Scenario};
use crate::load::{LoadReport, Op};
use crate::net::Link;
use crate::servers::broker::Broker;
use crate::stack::RedisSetup;

const SKU: u64 = 191;
const CONFIRMS_LOST: Duration = Duration::from_secs(4);
const FULL_CUT: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s19_partition_api_broker() {
    let mut sc = Scenario::begin_net(
        "s19",
        "api <-> broker partitioned 10 s (confirms lost, then both ways) under load",
        &partition::settings(),
        RedisSetup::Standalone,
        &["api"],
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    sc.stack.create_sku(SKU, 3_000, 3).await;
    let Broker::Single(rabbit) = &sc.stack.rabbit else {
        unreachable!("s19 runs one RabbitMQ node")
    };
    let link = Link::to_server("api", rabbit.ip, rabbit.port);
    let steps = [
        Step {
            links: vec![link.clone().replies_only()],
            fault: Fault::Cut,
            length: CONFIRMS_LOST,
        },
        Step {
            links: vec![link],
            fault: Fault::Cut,
            length: FULL_CUT,
        },
    ];
    let mut p = plan("s19", &[SKU], 1_500, 720, 40);
    p.concurrency = 24;
    let base = sc.stack.base.clone();
    let phases = partition::under_load(&mut sc, &base, p, 3_000, &steps).await;
    let answers = &phases.report.answers;
    let publish_ms = sc.stack.settings.amqp.publish_timeout_ms;
    let reserve = Bound {
        op: Op::Reserve,
        bound_ms: publish_ms + partition::redis_call_ms(&sc) + MARGIN_MS,
        statuses: &[200, 201, 202, 409],
        expected: Some(202),
    };
    bounds::judge(&mut sc, answers, &phases.during, &reserve);
    for op in [Op::Confirm, Op::Cancel] {
        let bound = Bound {
            op,
            bound_ms: partition::MYSQL_QUERY_TIMEOUT_MS + MARGIN_MS,
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
    let (in_mysql, acknowledged, oversold) = partition::settled_counts(&sc, &all).await;
    let (publishes, republished) = publish_counts(&sc).await;
    let consumed = metrics::consumer_outcomes(&sc).await;
    println!(
        "[s19] counts: acknowledged {acknowledged}; during the 10 s cut {} reserves: 202 {}, 201 {}; \
         api publishes {publishes:?}, relay republished {republished}, consumer messages \
         {consumed:?}; acknowledged in MySQL {in_mysql} of {acknowledged}; oversold {oversold}",
        during.len(),
        count(&during, 202, None),
        count(&during, 201, None),
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.finish(&all).await;
}

/// The api's publish outcomes and the relay's republishes (Prometheus counters).
async fn publish_counts(sc: &Scenario) -> (BTreeMap<String, u64>, u64) {
    let api = metrics::scrape(sc, "api").await;
    let publishes = ["ack", "nack", "timeout", "error", "returned"]
        .iter()
        .map(|o| {
            let label = format!("outcome=\"{o}\"");
            (
                o.to_string(),
                metrics::sum(&api, "stockd_publish_total", &label),
            )
        })
        .collect();
    let republished = metrics::sum(&api, "stockd_relay_republished_total", "");
    (publishes, republished)
}
