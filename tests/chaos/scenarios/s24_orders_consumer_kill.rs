//! Scenario 24: orders of three lines over five SKUs under load on a
//! standalone Redis, and kill -9 of the consumer three times in the middle
//! of batches of orders. The harness locks SKU 241's row in MySQL (SELECT …
//! FOR UPDATE), so every batch with an order on it blocks inside its
//! transaction (a batch locks its SKUs in ascending order, singles and
//! orders alike) while the backlog grows, and the consumer is killed there;
//! each kill returns the batch's deliveries to the queue. Every redelivered
//! order is applied once, whole: every acknowledged order is `RESERVED` in
//! MySQL with a ledger row per line, nothing is dead-lettered, the audits
//! are clean.

use std::time::Duration;

use mysql_async::prelude::Queryable;

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
    sc.open_skus(&skus, 5_000, 50).await;
    let load = orders::start(&mut sc, "s24", &skus, 3, 600, 16, 10);
    sc.pause(1_500, 500).await;
    sc.note("lock sku 241's row in MySQL so the consumer's order batches block");
    let mut lock = sc.stack.db().await;
    lock.query_drop("START TRANSACTION").await.unwrap();
    lock.query_drop("SELECT * FROM sku_stock WHERE sku_id = 241 FOR UPDATE")
        .await
        .unwrap();
    let deduct = sc.stack.topology.deduct_queue.clone();
    for round in 1..=3 {
        sc.pause(1_500, 1_000).await;
        let ready = sc.stack.rabbit.ready(&deduct).await;
        sc.note(&format!(
            "inject: kill -9 stockd --role consumer blocked in its batch (round {round}; {} \
             orders answered, {deduct}: {ready:?} ready)",
            load.answered()
        ));
        sc.stack.kill_role("consumer");
        sc.pause(500, 500).await;
        sc.stack.start_role("consumer").await;
    }
    sc.note("release the lock");
    lock.query_drop("ROLLBACK").await.unwrap();
    let _ = lock.disconnect().await;
    let stack = &sc.stack;
    let backlog_gone = sc
        .wait_for("the backlog applied", Duration::from_secs(60), || async {
            stack.rabbit.ready(&deduct).await == Some(0)
        })
        .await;
    sc.expect(backlog_gone, "the backlog is applied after the lock".into());
    sc.pause(1_000, 500).await;
    let placed = load.finish().await;
    let dlq = sc.stack.rabbit.ready(&sc.stack.topology.deduct_dlq).await;
    sc.expect(
        matches!(dlq, Some(0) | None),
        format!("nothing dead-lettered ({dlq:?})"),
    );
    orders::finish(sc, &placed).await;
}
