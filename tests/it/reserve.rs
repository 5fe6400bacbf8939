//! Stage 1 through HTTP: the admission decision and its contract §6 codes.

use serde_json::Value;

use crate::helpers::{TestApp, TestOptions};

async fn problem_code(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(ct, "application/problem+json", "status {status}");
    let body: Value = resp.json().await.unwrap();
    (status, body["code"].as_str().unwrap().to_string())
}

/// A reservation is 201, takes the unit in Redis and reaches MySQL (`persisted`).
#[tokio::test]
async fn a_reservation_is_created_decremented_and_persisted() {
    let app = TestApp::spawn_with_sku(1, 10, 2).await;
    let resp = app.reserve(1, "order-1", 7, 2).await;
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["status"], "RESERVED");
    assert_eq!(body["count"], 2);
    assert_eq!(body["user_id"], 7);
    assert!(body["expires_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(app.redis_available(1).await, Some(8));
    app.eventually("persisted", std::time::Duration::from_secs(20), || async {
        let (_, b) = app.get_json("/v1/skus/1/reservations/order-1").await;
        b["persisted"] == true
    })
    .await;
    assert_eq!(app.mysql_available(1).await, Some(8));
    let (status, sku) = app.get_json("/v1/skus/1").await;
    assert_eq!(status, 200);
    assert_eq!(
        sku,
        serde_json::json!({"sku_id":1,"available":8,"sold_out":false,"limit_per_user":2,
            "sale":null,"requires_pass":false})
    );
    app.finish_drained_and_conserved(1).await;
}

/// The same request again is a 200 replay with the header; no second deduction
/// anywhere. The same id with another count is 422 and changes nothing.
#[tokio::test]
async fn a_replay_is_answered_from_the_stored_outcome_and_a_mismatch_is_422() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_ok(1, "r", 7, 1).await;
    let replay = app.reserve(1, "r", 7, 1).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers().get("Idempotent-Replayed").unwrap(), "true");
    let body: Value = replay.json().await.unwrap();
    assert_eq!(body["request_id"], "r");
    let (status, code) = problem_code(app.reserve(1, "r", 7, 2).await).await;
    assert_eq!((status, code.as_str()), (422, "IDEMPOTENCY_MISMATCH"));
    let (status, code) = problem_code(app.reserve(1, "r", 8, 1).await).await;
    assert_eq!((status, code.as_str()), (422, "IDEMPOTENCY_MISMATCH"));
    assert_eq!(app.redis_available(1).await, Some(9));
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    assert_eq!(app.ledger_rows().await, 1);
    app.finish_conserved(1).await;
}

/// Limit, insufficient, sold out, unknown SKU: contract codes (docs/errors.md), and nothing written.
#[tokio::test]
async fn refusals_have_their_codes_and_write_nothing() {
    let app = TestApp::spawn_with_sku(1, 3, 2).await;
    app.reserve_ok(1, "a", 1, 2).await;
    let (s, c) = problem_code(app.reserve(1, "b", 1, 1).await).await;
    assert_eq!((s, c.as_str()), (409, "LIMIT_EXCEEDED"));
    let (s, c) = problem_code(app.reserve(1, "c", 2, 2).await).await;
    assert_eq!((s, c.as_str()), (409, "INSUFFICIENT_STOCK"));
    app.reserve_ok(1, "d", 2, 1).await;
    let (s, c) = problem_code(app.reserve(1, "e", 3, 1).await).await;
    assert_eq!((s, c.as_str()), (409, "SOLD_OUT"));
    let (s, c) = problem_code(app.reserve(99, "f", 3, 1).await).await;
    assert_eq!((s, c.as_str()), (404, "SKU_NOT_FOUND"));
    // Refused request ids left no reservation record behind.
    for rid in ["b", "c", "e"] {
        let (status, body) = app
            .get_json(&format!("/v1/skus/1/reservations/{rid}"))
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("RESERVATION_NOT_FOUND"))
        );
    }
    let (status, _) = app.get_json("/v1/skus/99").await;
    assert_eq!(status, 404);
    app.wait_ledger_rows(2).await;
    app.wait_drained(1).await;
    assert_eq!(app.ledger_rows().await, 2);
    app.assert_conserved(1).await;
    let (_, sku) = app.get_json("/v1/skus/1").await;
    assert_eq!(sku["sold_out"], true);
    app.cleanup().await;
}

/// A SKU that exists in MySQL but is missing from Redis is 503 with
/// Retry-After: never read as 0 and never as unlimited.
#[tokio::test]
async fn a_sku_missing_from_redis_is_unavailable_not_zero_or_unlimited() {
    let app = TestApp::spawn_with_sku(1, 5, 1).await;
    let mut conn = app.redis_conn().await;
    let key = app.res.redis.keys().sku(TestApp::sku(1));
    let _: () = deadpool_redis::redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let resp = app.reserve(1, "x", 1, 1).await;
    assert!(resp.headers().contains_key("retry-after"));
    let (s, c) = problem_code(resp).await;
    assert_eq!((s, c.as_str()), (503, "UNAVAILABLE"));
    assert_eq!(app.mysql_available(1).await, Some(5));
    let (status, _) = app.get_json("/v1/skus/1").await;
    assert_eq!(status, 503);
    app.cleanup().await;
}

/// Admin routes need the bearer token; a restock below what is reserved is 409.
#[tokio::test]
async fn admin_needs_the_token_and_cannot_go_below_reserved() {
    let app = TestApp::spawn().await;
    let resp = app
        .client
        .put(format!("{}/v1/admin/skus/1", app.base))
        .bearer_auth("wrong")
        .json(&serde_json::json!({"total_stock": 5, "limit_per_user": 1}))
        .send()
        .await
        .unwrap();
    let (s, c) = problem_code(resp).await;
    assert_eq!((s, c.as_str()), (401, "UNAUTHORIZED"));
    assert_eq!(app.mysql_available(1).await, None);
    // The token is checked before the body: anonymous garbage is 401, not 400.
    let resp = app
        .client
        .put(format!("{}/v1/admin/skus/1", app.base))
        .body("{not json")
        .send()
        .await
        .unwrap();
    let (s, c) = problem_code(resp).await;
    assert_eq!((s, c.as_str()), (401, "UNAUTHORIZED"));
    app.create_sku(1, 5, 5).await;
    app.reserve_ok(1, "a", 1, 3).await;
    let (s, _) = problem_code(app.put_sku(1, 2, 5).await).await;
    assert_eq!(s, 409);
    // Restock keeps live reservations: 5 -> 8 total, Redis 2 -> 5.
    app.create_sku(1, 8, 5).await;
    assert_eq!(app.redis_available(1).await, Some(5));
    app.wait_ledger_rows(1).await;
    app.finish_drained_and_conserved(1).await;
}

/// With `durability: redis` the answer is 201 before the broker confirm, and the
/// reservation still reaches MySQL.
#[tokio::test]
async fn redis_durability_answers_first_and_still_persists() {
    let app = TestApp::with(TestOptions {
        durability: stockd::config::Durability::Redis,
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 10).await;
    for i in 0..5 {
        assert_eq!(app.reserve(1, &format!("r{i}"), 1, 1).await.status(), 201);
    }
    app.wait_ledger_rows(5).await;
    app.finish_drained_and_conserved(1).await;
}
