//! Warm-up judges one SKU's work in the deduct queue, which every SKU shares
//! (contract §8.1): a probe sent behind what is queued tells it when every
//! deduction published before it was delivered, so a SKU can be warmed while
//! another sells, and never before its own queued deductions are in MySQL.

use std::time::Duration;

use crate::helpers::{TestApp, ADMIN_TOKEN};

/// Warms `sku` over HTTP while the stopped consumer comes back 300 ms into
/// the warm-up's wait: (status, `available` of the answer, body).
async fn warm_while_the_consumer_returns(
    app: &mut TestApp,
    sku: u64,
) -> (u16, Option<i64>, serde_json::Value) {
    let request = (app.client)
        .post(app.url(&format!("/v1/admin/skus/{sku}/warmup")))
        .bearer_auth(ADMIN_TOKEN);
    let warm = tokio::spawn(async move {
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap_or_default();
        (status, body)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    app.start_consumer();
    let (status, body) = warm.await.unwrap();
    (status, body["available"].as_i64(), body)
}

/// Defect: any message in the shared deduct queue refused every SKU's
/// warm-up, so no SKU could be warmed while another one sold.
#[tokio::test]
async fn another_skus_queued_deduction_does_not_refuse_a_warmup() {
    let mut app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    app.stop_consumer().await;
    app.reserve_ok(2, "y1", 1, 1).await;
    // The consumer comes back while the warm-up waits: the queue moves on.
    let (status, available, body) = warm_while_the_consumer_returns(&mut app, 1).await;
    assert_eq!((status, available), (200, Some(10)), "{body}");
    // The probe went to the deduct queue only: the expiry delay queue holds
    // the one reservation's expiry, nothing for the closer to choke on.
    let delay = &app.res.publisher.topology().expiry_delay_queue;
    assert_eq!(app.queue_depth(delay).await, 1, "the expiry delay queue");
    app.wait_ledger_rows(1).await;
    app.wait_drained(2).await;
    app.assert_conserved(1).await;
    app.finish_drained_and_conserved(2).await;
}

/// The probe is what makes that safe: a deduction of the SKU itself that
/// Redis forgot (its keys gone, the message still queued) is in MySQL
/// before the warm-up reads it, so Redis is not loaded above the truth.
#[tokio::test]
async fn a_warmup_reads_mysql_only_after_the_skus_queued_deductions() {
    let mut app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.stop_consumer().await;
    app.reserve_ok(1, "x1", 1, 2).await;
    let keys = app.redis_keys().await;
    // Redis lost the SKU; its deduction is still queued.
    app.redis_del(&keys).await;
    // No consumer: nothing passes the probe, so the warm-up is refused once
    // its wait (`reconcile.warmup_probe_wait_ms`) is over.
    let (status, body) = app.post_json_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("CONFLICT")),
        "{body}"
    );
    let detail = body["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("did not pass this warm-up's probe"),
        "{body}"
    );
    let (status, available, body) = warm_while_the_consumer_returns(&mut app, 1).await;
    assert_eq!((status, available), (200, Some(8)), "{body}");
    assert_eq!(app.mysql_available(1).await, Some(8));
    app.finish_drained_and_conserved(1).await;
}
