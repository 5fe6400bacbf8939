//! Redis losing data: restarted empty (warm-up rebuilds the admission state)
//! or restored to a point before acknowledged writes (the reconciler's repair
//! rebuilds the buyer side; the consumer enforces the limit in MySQL). The loss
//! is made on the test's own keys exactly as a restore would leave them.

use std::time::Duration;

use deadpool_redis::redis;

use crate::helpers::{TestApp, TestOptions};

/// Makes Redis forget one reservation as a restore from an older snapshot
/// would: no record, no winners entry, the buyer's counter and `available`
/// as they were before it.
async fn forget(app: &TestApp, sku: u64, rid: &str, user: u64, count: i64) {
    let keys = app.res.redis.keys();
    let sku_id = TestApp::sku(sku);
    let rid_t = stockd::domain::RequestId::parse(rid).unwrap();
    let user_t = stockd::domain::UserId::new(user).unwrap();
    let mut conn = app.redis_conn().await;
    let _: () = redis::pipe()
        .atomic()
        .cmd("DEL")
        .arg(keys.reservation(sku_id, &rid_t))
        .cmd("SREM")
        .arg(keys.winners(sku_id))
        .arg(rid)
        .cmd("HINCRBY")
        .arg(keys.user(sku_id, user_t))
        .arg("n")
        .arg(-count)
        .cmd("HINCRBY")
        .arg(keys.sku(sku_id))
        .arg("available")
        .arg(count)
        .cmd("HDEL")
        .arg(keys.sku(sku_id))
        .arg("soldout")
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// Deletes every key of the test (Redis restarted with no data, for this test).
async fn empty_redis(app: &TestApp) {
    let keys = app.redis_keys().await;
    app.redis_del(&keys).await;
}

/// Defect: after Redis restarted empty and the SKU was warmed up, a buyer at
/// the limit got another unit and retries of accepted ids were not replays.
#[tokio::test]
async fn after_redis_restarts_empty_warmup_keeps_limits_and_replays() {
    let app = TestApp::spawn_with_sku(1, 10, 1).await;
    app.reserve_ok(1, "a42", 42, 1).await;
    app.reserve_ok(1, "a43", 43, 1).await;
    assert_eq!(app.cancel(1, "a43").await.0, 200);
    app.wait_drained(1).await;
    empty_redis(&app).await;
    assert_eq!(app.reserve(1, "x", 1, 1).await.status(), 503, "not loaded");
    let warmed = app.post_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(warmed.status(), 200, "{:?}", warmed.text().await);
    let response = app.reserve(1, "b42", 42, 1).await;
    assert_eq!(response.status(), 409, "user 42 holds their one unit");
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["code"], "LIMIT_EXCEEDED");
    let replay = app.reserve(1, "a42", 42, 1).await;
    assert_eq!(
        replay.status(),
        200,
        "a retry of an accepted id is a replay"
    );
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let released = app.reserve(1, "a43", 43, 1).await;
    assert_eq!(
        released.status(),
        200,
        "a released id replays its final state"
    );
    let body: serde_json::Value = released.json().await.unwrap();
    assert_eq!(body["status"], "RELEASED");
    app.wait_drained(1).await;
    app.assert_conserved(1).await;
    let report = app.reconcile(false).await;
    assert!(report.healthy(), "{report:?}");
    app.cleanup().await;
}

/// Defect: after Redis lost an acknowledged write, a new request of a buyer at
/// the limit became a second live unit in MySQL. The consumer now rejects it
/// (LIMIT_EXCEEDED), Redis gets the unit back, and the reconciler sees the lost
/// record and rebuilds it.
#[tokio::test]
async fn a_buyer_never_exceeds_the_limit_in_mysql_after_redis_lost_a_write() {
    let app = TestApp::spawn_with_sku(1, 10, 1).await;
    app.reserve_ok(1, "a", 7, 1).await;
    app.wait_ledger_rows(1).await;
    forget(&app, 1, "a", 7, 1).await;
    let report = app.reconcile(false).await;
    assert_eq!(report.skus[0].verdict.as_str(), "REDIS_AHEAD", "{report:?}");
    assert_eq!(report.skus[0].missing_in_redis, 1);
    // Redis, not knowing `a`, admits `b`; MySQL refuses it.
    app.reserve_ok(1, "b", 7, 1).await;
    app.eventually("b rejected in MySQL", Duration::from_secs(20), || async {
        app.ledger_status(1, "b").await.as_deref() == Some("REJECTED")
    })
    .await;
    let (_, body) = app.get_json("/v1/skus/1/reservations/b").await;
    assert_eq!(body["status"], "REJECTED");
    app.wait_drained(1).await;
    let mut conn = app.mysql().await;
    use mysql_async::prelude::Queryable;
    let live: Option<i64> = conn
        .query_first(
            "SELECT CAST(SUM(deduct_count) AS SIGNED) FROM stock_deduct_idempotent
             WHERE user_id = 7 AND status IN ('RESERVED','CONFIRMED')",
        )
        .await
        .unwrap();
    assert_eq!(live, Some(1), "buyer 7 holds exactly the limit in MySQL");
    let report = app.reconcile(true).await;
    assert!(report.skus[0].repaired, "{report:?}");
    let report = app.reconcile(false).await;
    assert!(report.healthy(), "{report:?}");
    let replay = app.reserve(1, "a", 7, 1).await;
    assert_eq!(replay.status(), 200, "after the repair `a` is a replay");
    assert_eq!(
        app.reserve(1, "c", 7, 1).await.status(),
        409,
        "and the limit holds in Redis"
    );
    app.finish_conserved(1).await;
}

/// The snapshot-restore case, repair first: after the repair a new request of
/// the buyer is refused by Redis and a retry of `a` is a replay.
#[tokio::test]
async fn after_the_repair_a_lost_reservation_replays_and_the_limit_holds() {
    let app = TestApp::spawn_with_sku(1, 10, 1).await;
    app.reserve_ok(1, "a", 7, 1).await;
    app.wait_drained(1).await;
    forget(&app, 1, "a", 7, 1).await;
    let report = app.reconcile(true).await;
    assert!(report.skus[0].repaired, "{report:?}");
    let response = app.reserve(1, "b", 7, 1).await;
    assert_eq!(response.status(), 409, "the buyer's counter was rebuilt");
    let replay = app.reserve(1, "a", 7, 1).await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    app.wait_drained(1).await;
    let report = app.reconcile(false).await;
    assert_eq!(report.skus[0].verdict.as_str(), "OK", "{report:?}");
    app.finish_conserved(1).await;
}

/// The other order: a retry of `a` reaches Redis before any repair. Redis
/// admits it again (it lost the record); the consumer finds the duplicate, the
/// unit is held once, and after the repair everything agrees.
#[tokio::test]
async fn a_retry_readmitted_before_the_repair_is_held_once() {
    let app = TestApp::with(TestOptions::default()).await;
    app.create_sku(1, 10, 1).await;
    app.reserve_ok(1, "a", 7, 1).await;
    app.wait_drained(1).await;
    forget(&app, 1, "a", 7, 1).await;
    let retry = app.reserve(1, "a", 7, 1).await;
    assert!(retry.status().is_success());
    app.wait_drained(1).await;
    app.eventually("readmission settled", Duration::from_secs(10), || async {
        app.redis_available(1).await == app.mysql_available(1).await
    })
    .await;
    assert_eq!(app.mysql_available(1).await, Some(9), "one unit in MySQL");
    let _ = app.reconcile(true).await;
    let report = app.reconcile(false).await;
    assert!(report.healthy(), "{report:?}");
    assert_eq!(app.reserve(1, "b", 7, 1).await.status(), 409);
    app.finish_conserved(1).await;
}

/// A confirm mirrored while Redis had lost the record leaves a tombstone
/// (no winners entry, no counter); warm-up restores it like a missing record,
/// so the buyer's limit still holds (found by chaos s02).
#[tokio::test]
async fn a_confirm_during_the_loss_does_not_hide_the_unit_from_warmup() {
    let app = TestApp::spawn_with_sku(1, 10, 1).await;
    app.reserve_ok(1, "a", 7, 1).await;
    app.wait_drained(1).await;
    empty_redis(&app).await;
    assert_eq!(
        app.confirm(1, "a").await.0,
        200,
        "MySQL decides; Redis gets a tombstone"
    );
    let warmed = app.post_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(warmed.status(), 200);
    let response = app.reserve(1, "b", 7, 1).await;
    assert_eq!(response.status(), 409, "buyer 7 holds the confirmed unit");
    let replay = app.reserve(1, "a", 7, 1).await;
    assert_eq!(replay.status(), 200);
    let body: serde_json::Value = replay.json().await.unwrap();
    assert_eq!(body["status"], "CONFIRMED");
    assert_ne!(
        body["expires_at"], "1970-01-01T00:00:00.000Z",
        "real times restored"
    );
    app.finish_drained_and_conserved(1).await;
}
