//! Scenario 24: orders of three lines over five SKUs under load on a
//! standalone Redis, and kill -9 of the consumer three times while it
//! applies batches of orders (each order's lines and its order row in one
//! transaction). Every redelivered order is applied once, whole: every
//! acknowledged order is `RESERVED` in MySQL with a ledger row per line,
//! nothing is dead-lettered, the audits are clean.

use super::orders;
use super::Scenario;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s24_consumer_kill9_mid_order_batches_applies_each_order_once_whole() {
    let mut sc = Scenario::begin(
        "s24",
        "consumer kill -9 while it applies order batches",
        &[],
    )
    .await;
    let skus: Vec<u64> = (241..=245).collect();
    sc.open_skus(&skus, 1_000, 6).await;
    let load = orders::start(&mut sc, &skus, 3, 600, 16, 10);
    for round in 1..=3 {
        sc.pause(2_000, 1_500).await;
        let deduct = sc.stack.topology.deduct_queue.clone();
        let ready = sc.stack.rabbit.ready(&deduct).await;
        sc.note(&format!(
            "inject: kill -9 stockd --role consumer (round {round}; {} orders answered, \
             {deduct}: {ready:?} ready)",
            load.answered()
        ));
        sc.stack.kill_role("consumer");
        sc.pause(1_000, 1_000).await;
        sc.stack.start_role("consumer").await;
    }
    sc.pause(2_000, 1_000).await;
    let placed = load.finish().await;
    let dlq = sc.stack.rabbit.ready(&sc.stack.topology.deduct_dlq).await;
    sc.expect(
        matches!(dlq, Some(0) | None),
        format!("nothing dead-lettered ({dlq:?})"),
    );
    orders::finish(sc, &placed).await;
}
