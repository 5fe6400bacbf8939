//! Health, metrics and request ids as operators see them.

use crate::helpers::TestApp;

/// Every response carries a request id (the client's when sane); `/metrics`
/// exposes the request, reservation and publish series; `/readyz?verbose`
/// lists its checks to the admin token.
#[tokio::test]
async fn health_metrics_and_request_ids_are_served() {
    let app = TestApp::spawn_with_sku(1, 5, 5).await;
    let resp = app
        .client
        .post(app.url("/v1/skus/1/reservations"))
        .header("x-request-id", "trace-abc-1")
        .json(&serde_json::json!({"request_id": "m1", "user_id": 1, "count": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers().get("x-request-id").unwrap(), "trace-abc-1");
    let resp = app.get("/livez").await;
    let generated = resp
        .headers()
        .get("x-request-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(generated.len(), 36, "a UUID: {generated}");

    let (status, ready) = app.get_json_admin("/readyz?verbose").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["checks"]["scripts_loaded"], true);
    let (_, terse) = app.get_json("/readyz").await;
    assert!(terse.get("checks").is_none());

    stockd::roles::gauges::refresh(&app.res).await;
    let text = app.metrics_text().await;
    for series in [
        "stockd_http_requests_total{route=\"/v1/skus/{sku_id}/reservations\",status=\"201\",client=\"anonymous\"}",
        "stockd_reservations_total{result=\"reserved\"}",
        "stockd_publish_total{outcome=\"ack\"}",
        "stockd_reserve_duration_seconds_bucket",
        "stockd_dependency_up{dependency=\"redis\"} 1",
        "stockd_dependency_up{dependency=\"mysql\"} 1",
        "stockd_dependency_up{dependency=\"amqp\"} 1",
        "stockd_queue_messages{queue=",
        "stockd_outbox_oldest_age_seconds",
        "stockd_pool_connections{pool=\"redis\"",
    ] {
        assert!(text.contains(series), "missing {series}");
    }
    app.wait_ledger_rows(1).await;
    app.finish_drained(1).await;
}
