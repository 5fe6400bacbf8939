//! A consumer batch of many orders: applied in several transactions of at
//! most `ORDER_LINES_PER_TX` order lines (`src/db/ledger/order_chunks.rs`),
//! every order still whole, and the batch again is all duplicates. In one
//! transaction such a batch outgrew `mysql.query_timeout_ms`.

use mysql_async::prelude::Queryable;

use stockd::db::ledger::{self, ORDER_LINES_PER_TX};
use stockd::domain::{Deduction, OrderLine, OrderLines, RequestId, UserId};

use crate::helpers::{TestApp, TestOptions};

const ORDERS: u64 = 100;

/// Order `ob-<nnn>` (ids sort as numbers: a transaction applies its orders by id) of buyer `n`: one unit of each of SKUs 1, 2 and 3.
fn order(n: u64) -> Vec<Deduction> {
    let lines = (1..=3)
        .map(|sku| OrderLine {
            sku_id: TestApp::sku(sku),
            count: 1,
        })
        .collect();
    let lines = OrderLines::new(lines, 20).unwrap();
    let id = RequestId::parse(&format!("ob-{n:03}")).unwrap();
    Deduction::of_order(&id, UserId::new(n).unwrap(), &lines, n, u64::MAX / 2)
}

#[tokio::test]
async fn a_batch_of_many_orders_is_applied_whole_in_bounded_transactions() {
    let app = TestApp::with(TestOptions::default()).await;
    app.create_sku(1, 1_000, 1).await;
    app.create_sku(2, 1_000, 1).await;
    // One unit short: the last order of the batch (in its last transaction)
    // cannot be covered on SKU 3.
    app.create_sku(3, ORDERS as i64 - 1, 1).await;
    // One message per order (its first line), as the api publishes an order.
    let batch: Vec<Deduction> = (1..=ORDERS).map(|n| order(n).swap_remove(0)).collect();
    assert!(
        3 * ORDERS as usize > 2 * ORDER_LINES_PER_TX,
        "the batch spans several transactions"
    );
    let report = ledger::apply_batch(&app.res.db, &batch, 3).await.unwrap();
    assert_eq!(report.applied, 3 * (ORDERS as usize - 1));
    assert_eq!(report.rejected.len(), 3, "{:?}", report.rejected);
    assert!(report
        .rejected
        .iter()
        .all(|(msg, _)| msg.request_id.as_str() == format!("ob-{ORDERS:03}")));
    let mut db = app.mysql().await;
    let by_status: Vec<(String, i64)> = db
        .query("SELECT status, COUNT(*) FROM orders GROUP BY status ORDER BY status")
        .await
        .unwrap();
    assert_eq!(
        by_status,
        [
            ("REJECTED".to_string(), 1),
            ("RESERVED".to_string(), ORDERS as i64 - 1)
        ]
    );
    let live: Option<i64> = db
        .query_first(
            "SELECT COUNT(*) FROM stock_deduct_idempotent WHERE order_line = 1 AND status = 'RESERVED'",
        )
        .await
        .unwrap();
    assert_eq!(live, Some(3 * (ORDERS as i64 - 1)));
    drop(db);
    assert_eq!(
        app.mysql_available(1).await,
        Some(1_000 - (ORDERS as i64 - 1))
    );
    assert_eq!(app.mysql_available(3).await, Some(0));
    // Redelivered whole: every order is a duplicate, nothing moves.
    let again = ledger::apply_batch(&app.res.db, &batch, 3).await.unwrap();
    assert_eq!((again.applied, again.rejected.len()), (0, 0));
    assert_eq!(again.duplicates, 3 * ORDERS as usize);
    assert_eq!(app.mysql_available(3).await, Some(0));
    app.cleanup().await;
}
