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

use std::time::Duration;

use super::partition::{self, count};
use super::{metrics, partition_run};
use crate::load::Op;
use crate::net::Link;
use crate::servers::broker::Broker;

const SKU: u64 = 191;
const CONFIRMS_LOST: Duration = Duration::from_secs(4);
const FULL_CUT: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s19_partition_api_broker() {
    let title = "api <-> broker partitioned 10 s (confirms lost, then both ways) under load";
    let mut sc = partition_run::begin("s19", title, &["api"], SKU).await;
    let Broker::Single(rabbit) = &sc.stack.rabbit else {
        unreachable!("s19 runs one RabbitMQ node")
    };
    let link = Link::to_server("api", rabbit.ip, rabbit.port);
    let steps = partition_run::replies_then_both(link, CONFIRMS_LOST, FULL_CUT);
    let p = partition_run::load_plan("s19", SKU, 720);
    let phases = partition_run::play(&mut sc, p, &steps).await;
    let answers = &phases.report.answers;
    let publish_ms = sc.stack.settings.amqp.publish_timeout_ms;
    let redis_ms = partition::redis_call_ms(&sc);
    let reserve =
        partition_run::reserve_bound(publish_ms + redis_ms, &[200, 201, 202, 409], Some(202));
    let lifecycle_ms = partition::MYSQL_QUERY_TIMEOUT_MS;
    partition_run::judge_during(&mut sc, &phases, &reserve, lifecycle_ms);

    let (_, all) = partition_run::settle(&mut sc, &phases).await;
    let during = phases.during.of(answers, Op::Reserve);
    let (in_mysql, acknowledged, oversold) = partition::settled_counts(&sc, &all).await;
    let (publishes, republished) = metrics::publish_counts(&sc).await;
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
