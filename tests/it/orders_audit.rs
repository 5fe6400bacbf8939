//! `stockd audit`'s order checks: a clean run with orders placed, paid and
//! cancelled over HTTP; then each injected fault (a line row out of step
//! with its order, a line row gone, a line record released in Redis under a
//! live order) fails the check that names it.

use std::sync::Arc;

use serde_json::json;
use stockd::ops::invariants::{
    self, InvariantReport, ORDERS_WHOLE, ORDER_LINES_IN_LEDGER, ORDER_STATUS_MATCHES,
};

use crate::helpers::{TestApp, TestOptions};

async fn audit(app: &TestApp) -> InvariantReport {
    invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap()
}

fn failed(report: &InvariantReport, check: &str) -> bool {
    !report.check(check).unwrap().ok
}

async fn place(app: &TestApp, order_id: &str, user: u64) {
    let body = json!({"order_id": order_id, "user_id": user,
        "lines": [{"sku_id": 1, "count": 1}, {"sku_id": 2, "count": 1}]});
    let resp = app
        .client
        .post(app.url("/v1/orders"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "{order_id}");
}

#[tokio::test]
async fn the_order_checks_pass_on_whole_orders_and_name_each_broken_one() {
    let app = TestApp::with(TestOptions {
        tweak: Some(Arc::new(|s| s.closer.grace_ms = 0)),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    for (order_id, user) in [("paid", 1), ("gone", 2), ("live", 3), ("kept", 4)] {
        place(&app, order_id, user).await;
    }
    app.wait_ledger_rows(8).await;
    assert_eq!(app.post_json("/v1/orders/paid/confirm").await.0, 200);
    assert_eq!(app.post_json("/v1/orders/gone/cancel").await.0, 200);
    app.wait_drained(1).await;
    app.wait_drained(2).await;
    let clean = audit(&app).await;
    assert!(clean.ok, "{}", clean.table());

    // A line released in Redis under a live order: half an order there.
    let key = app.res.redis.keys().reservation(
        TestApp::sku(2),
        &stockd::domain::RequestId::parse("kept").unwrap(),
    );
    app.redis_cmd(&["HSET", &key, "status", "RELEASED"]).await;
    let report = audit(&app).await;
    assert!(failed(&report, ORDERS_WHOLE), "{}", report.table());
    assert!(!failed(&report, ORDER_STATUS_MATCHES), "{}", report.table());
    app.redis_cmd(&["HSET", &key, "status", "RESERVED"]).await;

    // A line row out of step with its order in MySQL.
    app.sql(
        "UPDATE stock_deduct_idempotent SET status = 'RELEASED'
         WHERE deduct_request_id = 'live' AND sku_id = 2",
    )
    .await;
    let report = audit(&app).await;
    assert!(failed(&report, ORDER_STATUS_MATCHES), "{}", report.table());
    assert!(failed(&report, ORDERS_WHOLE), "{}", report.table());
    assert!(
        !failed(&report, ORDER_LINES_IN_LEDGER),
        "{}",
        report.table()
    );

    // A line row gone.
    app.sql("DELETE FROM stock_deduct_idempotent WHERE deduct_request_id = 'paid' AND sku_id = 1")
        .await;
    let report = audit(&app).await;
    let lines = report.check(ORDER_LINES_IN_LEDGER).unwrap();
    assert_eq!(lines.violations, 1, "{}", report.table());
    assert!(lines.details[0].contains("order paid"), "{lines:?}");
    app.cleanup().await;
}
