//! Scenario 4: the RabbitMQ node is killed with SIGKILL — once with a backlog
//! in the work queue (consumer stopped), once under load with the consumer
//! running — and restarted on its data. Quorum queues keep every confirmed
//! message; the outbox relay republishes what was not confirmed. An order
//! service model keeps its view from the events alone and must end equal to
//! the ledger: events survive the kills (the event outbox and the relays).

use super::{plan, Scenario};
use crate::load::LoadReport;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s04_broker_kill9_with_and_without_backlog_loses_nothing() {
    let mut sc =
        Scenario::begin("s04", "RabbitMQ kill -9 with a backlog and under load", &[]).await;
    sc.stack.start_roles(&["api", "closer"]).await;
    // The broker dies twice under the events too: the model must still end
    // with MySQL's view (relays republish what was not confirmed).
    sc.watch_events().await;
    let skus = [41, 42];
    for sku in skus {
        sc.stack.create_sku(sku, 800, 2).await;
    }

    sc.note("phase A: consumer stopped, build a backlog");
    let backlog = sc.load(plan("s04a", &skus, 500, 600, 100)).finish().await;
    let deduct = sc.stack.topology.deduct_queue.clone();
    let ready = sc.stack.rabbit.ready(&deduct).await;
    sc.expect(
        ready.unwrap_or(0) > 0,
        format!("backlog in {deduct}: {ready:?} messages"),
    );
    sc.note("inject: kill -9 the broker with the backlog");
    sc.stack.rabbit.kill9();
    sc.pause(2_000, 1_000).await;
    sc.note("restart the broker");
    sc.stack.rabbit.restart().await;
    let after = sc.stack.rabbit.ready(&deduct).await;
    // Messages, not deductions: duplicates the relay republished while their
    // first copy awaited its confirm may be gone after the kill (unconfirmed),
    // so the count can drop; the audit checks that no deduction was lost.
    sc.expect(
        after.unwrap_or(0) > 0,
        format!("backlog survived the kill: {ready:?} messages before, {after:?} after"),
    );
    sc.stack.start_role("consumer").await;

    sc.note("phase B: consumer running, kill -9 the broker under load");
    let load = sc.load(plan("s04b", &skus, 500, 900, 100));
    sc.pause(3_000, 2_000).await;
    sc.note("inject: kill -9 the broker");
    sc.stack.rabbit.kill9();
    sc.pause(2_000, 1_000).await;
    sc.note("restart the broker");
    sc.stack.rabbit.restart().await;
    let under_load = load.finish().await;
    sc.expect_sane_answers(&backlog);
    sc.expect_sane_answers(&under_load);
    sc.finish(&LoadReport::merge(&[&backlog, &under_load]))
        .await;
}
