//! Scenario 7: the consumer is killed with SIGKILL while it holds deliveries,
//! six times — more than the delivery limit of 5 that used to dead-letter a
//! whole backlog after a short crash loop. A backlog smaller than
//! the prefetch is built with the consumer stopped; the SKU row is then locked
//! in MySQL by the harness (SELECT … FOR UPDATE), so each consumer that starts
//! takes every message and blocks in its batch transaction — and is killed
//! there. Each kill returns every message to the queue (a redelivery). Crashes
//! are not attempts the message caused: nothing may be dead-lettered (the
//! quorum `x-delivery-limit` does it once a message was returned more often
//! than the limit). An order service model fed by events alone ends equal to
//! the ledger.

use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::{plan, Scenario};

/// Kills of a consumer holding the whole backlog.
const KILLS: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s07_consumer_kill9_five_times_holding_deliveries_dead_letters_nothing() {
    let mut sc = Scenario::begin("s07", "consumer kill -9 x5 while holding deliveries", &[]).await;
    sc.stack.start_roles(&["api", "closer"]).await;
    // Every kill returns deliveries the consumer held: the `persisted`
    // events come from the consumer that finally commits, once per change.
    sc.watch_events().await;
    let skus = [71];
    sc.stack.create_sku(71, 2_000, 2).await;
    // At most one broker message per request, so 900 requests always leave a
    // backlog below the prefetch of 1,000 (1,200 once gave 1,005 messages and
    // left 5 undelivered, which the "holds every message" check cannot meet).
    let report = sc.load(plan("s07", &skus, 900, 900, 150)).finish().await;
    let deduct = sc.stack.topology.deduct_queue.clone();
    let backlog = sc.stack.rabbit.ready(&deduct).await.unwrap_or(0);
    let prefetch = sc.stack.settings.consumer.prefetch as usize;
    sc.expect(
        backlog > 0 && backlog as usize <= prefetch,
        format!("backlog of {backlog} messages in {deduct} (prefetch {prefetch})"),
    );

    sc.note("lock sku 71's row in MySQL so the consumer's batch blocks");
    let mut lock = sc.stack.db().await;
    lock.query_drop("START TRANSACTION").await.unwrap();
    lock.query_drop("SELECT * FROM sku_stock WHERE sku_id = 71 FOR UPDATE")
        .await
        .unwrap();
    for kill in 1..=KILLS {
        sc.stack.start_role("consumer").await;
        let stack = &sc.stack;
        let queue = deduct.clone();
        let holding = sc
            .wait_for(
                "consumer holds every message",
                Duration::from_secs(20),
                || async { stack.rabbit.ready(&queue).await == Some(0) },
            )
            .await;
        sc.expect(
            holding,
            format!("kill {kill}: consumer took the whole backlog"),
        );
        sc.pause(300, 300).await;
        let ready = sc.stack.rabbit.ready(&deduct).await;
        sc.note(&format!(
            "inject: kill -9 consumer #{kill} ({deduct}: {ready:?} ready)"
        ));
        sc.stack.kill_role("consumer");
        sc.pause(200, 300).await;
    }
    sc.note("release the lock; start the consumer");
    lock.query_drop("ROLLBACK").await.unwrap();
    let _ = lock.disconnect().await;
    let dlq = sc.stack.rabbit.ready(&sc.stack.topology.deduct_dlq).await;
    sc.note(&format!(
        "{} right after the kills: {dlq:?} messages",
        sc.stack.topology.deduct_dlq
    ));
    sc.stack.start_role("consumer").await;
    sc.finish(&report).await;
}
