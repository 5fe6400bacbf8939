//! Adjusting stock during a live sale and the movement history
//! (`POST /v1/admin/skus/{id}/adjustments`, `GET …/movements`;
//! docs/operations.md, "Adjusting stock during a sale"): deltas in both
//! stores, compare-and-set, never below what is live, idempotent by
//! `adjustment_id`, refusals write nothing, and movements plus the ledger
//! explain the final stock exactly, also with reservations racing the
//! adjustments.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{send_for_json, TestApp, ADMIN_TOKEN};

impl TestApp {
    /// `POST /v1/admin/skus/{sku}/adjustments` with the admin token.
    pub async fn adjust(&self, sku: u64, body: &Value) -> (u16, Value) {
        let url = self.url(&format!("/v1/admin/skus/{sku}/adjustments"));
        send_for_json(self.client.post(url).bearer_auth(ADMIN_TOKEN).json(body)).await
    }

    /// Every movement of `sku`, following `next` with pages of `limit`.
    async fn movements(&self, sku: u64, limit: u32) -> Vec<Value> {
        let mut all = Vec::new();
        let mut after = 0;
        loop {
            let path = format!("/v1/admin/skus/{sku}/movements?after={after}&limit={limit}");
            let (status, page) = self.get_json_admin(&path).await;
            assert_eq!(status, 200, "{page}");
            all.extend(page["movements"].as_array().unwrap().iter().cloned());
            match page["next"].as_u64() {
                Some(next) => after = next,
                None => return all,
            }
        }
    }

    /// MySQL's (total, available) of `sku`.
    async fn mysql_stock(&self, sku: u64) -> (i64, i64) {
        (
            self.mysql_total(sku).await,
            self.mysql_available(sku).await.unwrap(),
        )
    }
}

/// An adjustment moves both stores by its delta, answers 201 with the
/// movement (before/after, reason, reference, actor), and the PUT that
/// created and restocked the SKU are movements too.
#[tokio::test]
async fn an_adjustment_moves_both_stores_and_is_a_movement() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_ok(1, "a", 7, 3).await;
    app.wait_drained(1).await;
    let (status, m) = app
        .adjust(
            1,
            &json!({"delta": 5, "reason": "late delivery", "reference": "PO-1"}),
        )
        .await;
    assert_eq!(status, 201, "{m}");
    assert_eq!(m["kind"], "adjustment");
    assert_eq!(m["delta"], 5);
    assert_eq!(
        (m["total_before"].as_i64(), m["total_after"].as_i64()),
        (Some(10), Some(15))
    );
    assert_eq!(
        (
            m["available_before"].as_i64(),
            m["available_after"].as_i64()
        ),
        (Some(7), Some(12))
    );
    assert_eq!(m["reason"], "late delivery");
    assert_eq!(m["reference"], "PO-1");
    assert_eq!(m["actor"], "admin-token");
    assert_eq!(app.redis_available(1).await, Some(12));
    assert_eq!(app.mysql_stock(1).await, (15, 12));
    let (status, _) = app
        .adjust(1, &json!({"delta": -2, "reason": "damaged"}))
        .await;
    assert_eq!(status, 201);
    assert_eq!(app.put_sku(1, 20, 5).await.status(), 200);
    let kinds: Vec<(String, i64)> = app
        .movements(1, 2)
        .await
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap().to_string(),
                m["delta"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("create", 10),
        ("adjustment", 5),
        ("adjustment", -2),
        ("restock", 7),
    ];
    let expected: Vec<(String, i64)> = expected.iter().map(|(k, d)| (k.to_string(), *d)).collect();
    assert_eq!(kinds, expected, "in order, over pages of 2");
    assert_eq!(app.redis_available(1).await, Some(17));
    app.finish_conserved(1).await;
}

/// `expected_available` is a compare-and-set on MySQL's available: a moved
/// value is 409 `STALE` with `current_available`, and nothing changes.
#[tokio::test]
async fn a_stale_expected_available_is_409_with_the_current_value() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_ok(1, "a", 7, 2).await;
    app.wait_drained(1).await;
    let (status, body) = app
        .adjust(
            1,
            &json!({"delta": 5, "reason": "r", "expected_available": 10}),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("STALE")),
        "{body}"
    );
    assert_eq!(body["current_available"], 8);
    assert_eq!(app.mysql_stock(1).await, (10, 8));
    assert_eq!(app.redis_available(1).await, Some(8));
    let (status, _) = app
        .adjust(
            1,
            &json!({"delta": 5, "reason": "r", "expected_available": 8}),
        )
        .await;
    assert_eq!(status, 201);
    assert_eq!(app.mysql_stock(1).await, (15, 13));
    assert_eq!(
        app.movements(1, 100).await.len(),
        2,
        "create + one adjustment"
    );
    app.finish_conserved(1).await;
}

/// A cut deeper than what is not live is 409 `BELOW_RESERVED`; nothing changes.
#[tokio::test]
async fn a_cut_below_what_is_live_is_refused() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_ok(1, "a", 7, 4).await;
    app.wait_drained(1).await;
    let (status, body) = app.adjust(1, &json!({"delta": -7, "reason": "r"})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("BELOW_RESERVED")),
        "{body}"
    );
    assert_eq!(app.mysql_stock(1).await, (10, 6));
    assert_eq!(app.redis_available(1).await, Some(6));
    let (status, m) = app.adjust(1, &json!({"delta": -6, "reason": "r"})).await;
    assert_eq!(status, 201, "{m}");
    assert_eq!(app.redis_available(1).await, Some(0));
    let (_, sku) = app.get_json("/v1/skus/1").await;
    assert_eq!(sku["sold_out"], true, "a cut to 0 sells the SKU out: {sku}");
    assert_eq!(app.movements(1, 100).await.len(), 2);
    app.finish_conserved(1).await;
}

/// The same `adjustment_id` answers the first movement again (200,
/// `Idempotent-Replayed`) and applies nothing; another body under it is 422.
#[tokio::test]
async fn an_adjustment_id_makes_the_call_idempotent() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let body = json!({"delta": 3, "reason": "r", "adjustment_id": "restock-1"});
    let (status, first) = app.adjust(1, &body).await;
    assert_eq!(status, 201);
    let url = app.url("/v1/admin/skus/1/adjustments");
    let again = app
        .client
        .post(&url)
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["Idempotent-Replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    let other = json!({"delta": 4, "reason": "r", "adjustment_id": "restock-1"});
    let (status, problem) = app.adjust(1, &other).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (422, Some("IDEMPOTENCY_MISMATCH"))
    );
    assert_eq!(app.mysql_stock(1).await, (13, 13));
    assert_eq!(app.redis_available(1).await, Some(13));
    assert_eq!(app.movements(1, 100).await.len(), 2);
    app.finish_conserved(1).await;
}

/// Bad input is 400 problem+json, an unknown SKU 404, no token 401; none of
/// them writes anything.
#[tokio::test]
async fn bad_adjustments_are_refused_and_write_nothing() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let bad = [
        json!({"delta": 0, "reason": "r"}),
        json!({"delta": 1}),
        json!({"delta": 1, "reason": "  "}),
        json!({"delta": 1, "reason": "r", "extra": true}),
        json!({"delta": 1, "reason": "r", "expected_available": -1}),
        json!({"delta": 1, "reason": "r", "adjustment_id": "has space"}),
        json!({"delta": 1, "reason": "x".repeat(201)}),
        json!({"delta": "1", "reason": "r"}),
    ];
    for body in bad {
        let (status, problem) = app.adjust(1, &body).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (400, Some("INVALID_REQUEST")),
            "{body}"
        );
    }
    let (status, problem) = app.adjust(2, &json!({"delta": 1, "reason": "r"})).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (404, Some("SKU_NOT_FOUND"))
    );
    let anonymous = app
        .client
        .post(app.url("/v1/admin/skus/1/adjustments"))
        .json(&json!({"delta": 1, "reason": "r"}))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let (status, _) = app.get_json("/v1/admin/skus/1/movements").await;
    assert_eq!(status, 401);
    let (status, problem) = app.get_json_admin("/v1/admin/skus/2/movements").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (404, Some("SKU_NOT_FOUND"))
    );
    let (status, _) = app
        .get_json_admin("/v1/admin/skus/1/movements?limit=0")
        .await;
    assert_eq!(status, 400);
    let (status, _) = app
        .get_json_admin("/v1/admin/skus/1/movements?cursor=1")
        .await;
    assert_eq!(status, 400);
    assert_eq!(app.mysql_stock(1).await, (10, 10));
    assert_eq!(app.redis_available(1).await, Some(10));
    assert_eq!(app.movements(1, 100).await.len(), 1, "only the creation");
    app.finish_conserved(1).await;
}

/// Adjustments racing 60 concurrent buyers: no reservation is refused for
/// anything but stock, both stores conserve, and the movements plus the
/// ledger explain the final stock exactly (total = Σ delta; available =
/// Σ delta − live units).
#[tokio::test]
async fn adjustments_racing_reservations_keep_both_stores_exact() {
    let app = TestApp::spawn_with_sku(1, 20, 1).await;
    let buyers = (1..=60u64).map(|user| {
        let app = &app;
        async move {
            tokio::time::sleep(Duration::from_millis(user * 3)).await;
            let resp = app.reserve(1, &format!("r{user}"), user, 1).await;
            resp.status().as_u16()
        }
    });
    let adjustments = (0..10i64).map(|i| {
        let app = &app;
        async move {
            tokio::time::sleep(Duration::from_millis(i as u64 * 17)).await;
            let delta = if i % 3 == 2 { -2 } else { 4 };
            let body = json!({"delta": delta, "reason": "race", "adjustment_id": format!("a{i}")});
            app.adjust(1, &body).await.0
        }
    });
    let (answers, adjusted) = tokio::join!(
        futures_util::future::join_all(buyers),
        futures_util::future::join_all(adjustments)
    );
    for status in &answers {
        assert!(
            matches!(status, 201 | 202 | 409),
            "reserve answered {status}"
        );
    }
    for status in &adjusted {
        assert!(matches!(status, 201 | 409), "adjustment answered {status}");
    }
    app.wait_drained(1).await;
    let sold = answers.iter().filter(|s| matches!(s, 201 | 202)).count() as i64;
    let moved: i64 = app
        .movements(1, 3)
        .await
        .iter()
        .map(|m| m["delta"].as_i64().unwrap())
        .sum();
    let (total, available) = app.mysql_stock(1).await;
    assert_eq!(total, moved, "total is the sum of the movements");
    assert_eq!(
        available,
        moved - sold,
        "available is movements minus what sold"
    );
    assert_eq!(app.ledger_rows_of(1).await as i64, sold);
    assert!(
        adjusted.iter().filter(|s| **s == 201).count() >= 7,
        "{adjusted:?}"
    );
    let audit = stockd::ops::invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap();
    assert!(
        audit.failed().is_empty(),
        "stockd audit:\n{}",
        audit.table()
    );
    app.finish_conserved(1).await;
}
