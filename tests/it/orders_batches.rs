//! A consumer batch of many orders: applied in several transactions of at
//! most `ORDER_LINES_PER_TX` order lines (`src/db/ledger/order_chunks.rs`),
//! every order still whole, and the batch again is all duplicates (in one
//! transaction such a batch outgrew `mysql.query_timeout_ms` when orders
//! were fitted line by line); and orders of one transaction fitted against
//! each other and the batch's single reservations (the fit is set-based: a
//! buyer's quota and a SKU's units are read once and used up in memory).

use mysql_async::prelude::Queryable;

use stockd::db::ledger::{self, ORDER_LINES_PER_TX};
use stockd::domain::{Deduction, RequestId, UserId};

use crate::helpers::{TestApp, TestOptions};

const ORDERS: u64 = 400;

/// Order `ob-<nnn>` (ids sort as numbers: a transaction applies its orders by id) of buyer `n`: one unit of each of SKUs 1, 2 and 3.
fn order(n: u64) -> Vec<Deduction> {
    let lines = TestApp::order_lines(&[(1, 1), (2, 1), (3, 1)]);
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

/// Order `id` of `user`: `count` units of each SKU of `skus`.
fn order_of(id: &str, user: u64, skus: &[u64], count: u32) -> Deduction {
    let parts: Vec<(u64, u32)> = skus.iter().map(|&sku| (sku, count)).collect();
    let lines = TestApp::order_lines(&parts);
    let id = RequestId::parse(id).unwrap();
    Deduction::of_order(&id, UserId::new(user).unwrap(), &lines, 1, u64::MAX / 2).swap_remove(0)
}

#[tokio::test]
async fn orders_of_one_transaction_share_the_quota_and_the_units() {
    let app = TestApp::with(TestOptions::default()).await;
    app.create_sku(1, 100, 2).await;
    app.create_sku(2, 3, 5).await;
    let single = Deduction {
        order: None,
        ..order_of("single-7", 7, &[1], 1)
    };
    let batch = vec![
        // Buyer 7: a single unit of SKU 1 and two orders of one unit each:
        // the second order passes the limit of 2 on SKU 1.
        single,
        order_of("o-a", 7, &[1, 2], 1),
        order_of("o-b", 7, &[1, 2], 1),
        // Buyer 8 takes SKU 2's last two units; buyer 9 finds none left.
        order_of("o-c", 8, &[2], 2),
        order_of("o-d", 9, &[1, 2], 1),
    ];
    let report = ledger::apply_batch(&app.res.db, &batch, 3).await.unwrap();
    let mut db = app.mysql().await;
    let orders: Vec<(String, String, Option<String>, Option<u64>)> = db
        .query("SELECT order_id, status, reason, failed_sku_id FROM orders ORDER BY order_id")
        .await
        .unwrap();
    let sku = |n: u64| Some(TestApp::sku(n).get());
    assert_eq!(
        orders,
        [
            ("o-a".into(), "RESERVED".into(), None, None),
            (
                "o-b".into(),
                "REJECTED".into(),
                Some("LIMIT_EXCEEDED".into()),
                sku(1)
            ),
            ("o-c".into(), "RESERVED".into(), None, None),
            (
                "o-d".into(),
                "REJECTED".into(),
                Some("OVER_ADMITTED".into()),
                sku(2)
            ),
        ]
    );
    let lines: Vec<(String, u64, String, Option<String>)> = db
        .query(
            "SELECT deduct_request_id, sku_id, status, reason FROM stock_deduct_idempotent
             WHERE order_line = 1 AND status = 'REJECTED' ORDER BY deduct_request_id, sku_id",
        )
        .await
        .unwrap();
    let (one, two) = (TestApp::sku(1).get(), TestApp::sku(2).get());
    assert_eq!(
        lines,
        [
            (
                "o-b".into(),
                one,
                "REJECTED".into(),
                Some("LIMIT_EXCEEDED".into())
            ),
            (
                "o-b".into(),
                two,
                "REJECTED".into(),
                Some("ORDER_REJECTED".into())
            ),
            (
                "o-d".into(),
                one,
                "REJECTED".into(),
                Some("ORDER_REJECTED".into())
            ),
            (
                "o-d".into(),
                two,
                "REJECTED".into(),
                Some("OVER_ADMITTED".into())
            ),
        ]
    );
    drop(db);
    assert_eq!(
        report.applied,
        1 + 2 + 1,
        "the single, o-a's lines, o-c's line"
    );
    assert_eq!(app.mysql_available(1).await, Some(100 - 2));
    assert_eq!(app.mysql_available(2).await, Some(0));
    app.cleanup().await;
}
