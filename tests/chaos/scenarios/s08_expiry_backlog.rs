//! Scenario 8: the consumer is stopped for 60 s with a 5 s reservation TTL,
//! so reservations expire (and some are paid or cancelled) before their
//! deduction reaches MySQL. The closer applies each deduction from the
//! reservation data before releasing it; when the consumer comes back its
//! deliveries are duplicates. Every unpaid reservation is released exactly
//! once and its stock is back in both stores.

use std::time::Duration;

use super::{plan, Scenario};
use crate::stores;

/// Reservation TTL in this scenario, seconds.
const TTL_SECS: u64 = 5;
/// How long the consumer stays stopped.
const CONSUMER_DOWN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s08_consumer_down_60s_with_5s_ttl_releases_each_unpaid_once() {
    let ttl = [("STOCKD__RESERVATION__TTL_SECS", TTL_SECS.to_string())];
    let mut sc = Scenario::begin(
        "s08",
        "consumer stopped 60 s, reservations expire meanwhile",
        &ttl,
    )
    .await;
    let skus = [81, 82];
    sc.open_skus(&skus, 300, 2).await;
    sc.note("inject: stop the consumer (SIGTERM) for 60 s");
    sc.stack.stop_role("consumer");
    let stopped = std::time::Instant::now();
    let mut p = plan("s08", &skus, 200, 500, 100);
    p.confirm_share = 0.1;
    p.cancel_share = 0.05;
    let report = sc.load(p).finish().await;
    tokio::time::sleep(CONSUMER_DOWN.saturating_sub(stopped.elapsed())).await;
    let deduct = sc.stack.topology.deduct_queue.clone();
    let backlog = sc.stack.rabbit.ready(&deduct).await;
    sc.note(&format!(
        "restart the consumer; backlog {backlog:?} messages"
    ));
    sc.stack.start_role("consumer").await;

    sc.wait_queues_empty(Duration::from_secs(60)).await;
    let ledger = stores::ledger(&sc.stack).await;
    let confirmed: i64 = ledger
        .iter()
        .filter(|r| r.status == "CONFIRMED")
        .map(|r| r.count)
        .sum();
    let reserved = ledger.iter().filter(|r| r.status == "RESERVED").count();
    sc.expect(
        reserved == 0,
        format!("no reservation still RESERVED after its TTL ({reserved})"),
    );
    for row in stores::sku_rows(&sc.stack).await {
        let sku_confirmed: i64 = ledger
            .iter()
            .filter(|r| r.sku == row.sku && r.status == "CONFIRMED")
            .map(|r| r.count)
            .sum();
        sc.expect(
            row.available == row.total - sku_confirmed,
            format!(
                "sku {}: MySQL available {} == total {} - confirmed {sku_confirmed}",
                row.sku, row.available, row.total
            ),
        );
    }
    sc.note(&format!("confirmed units overall: {confirmed}"));
    sc.finish(&report).await;
}
