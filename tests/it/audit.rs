//! `stockd audit`: the contract §10 invariants (contract §16 lists which) checked read-only; each injected
//! fault fails exactly the check that names it, and the exit code says so.

use std::time::Duration;

use stockd::ops::invariants::{self, InvariantReport};

use crate::helpers::TestApp;

async fn audit(app: &TestApp) -> InvariantReport {
    invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap()
}

/// Two buyers reserve, one confirms, one cancels; once drained every check
/// passes and `stockd audit --json` exits 0 with the documented shape.
#[tokio::test]
async fn an_audit_after_normal_reservations_and_a_drain_is_clean() {
    let app = TestApp::spawn_with_sku(1, 10, 3).await;
    app.create_sku(2, 5, 1).await;
    for (sku, rid, user, count) in [
        (1, "a", 1, 2),
        (1, "b", 2, 1),
        (1, "c", 2, 1),
        (2, "d", 1, 1),
    ] {
        app.reserve_ok(sku, rid, user, count).await;
    }
    app.wait_ledger_rows(4).await;
    assert_eq!(app.confirm(1, "a").await.0, 200);
    assert_eq!(app.cancel(1, "b").await.0, 200);
    app.wait_drained(1).await;
    app.wait_drained(2).await;
    let report = audit(&app).await;
    assert!(report.ok, "{}", report.table());
    let names: Vec<&str> = report.checks.iter().map(|c| c.check.as_str()).collect();
    assert_eq!(names, invariants::CHECKS);
    let run = app.stockd(&["audit", "--json"], &[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["ok"], true);
    assert!(json["checked_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        json["checks"].as_array().unwrap().len(),
        invariants::CHECKS.len()
    );
    for check in json["checks"].as_array().unwrap() {
        assert_eq!(
            (&check["ok"], &check["violations"]),
            (&true.into(), &0.into())
        );
    }
    let table = app.stockd(&["audit", "--sku", "2"], &[]).await;
    assert_eq!(table.code, 0, "{table:?}");
    assert!(table.stdout.contains("stores_agree"), "{table:?}");
    app.cleanup().await;
}

/// Redis `available` moved behind the service's back: only `stores_agree`
/// fails, and the CLI exits 1.
#[tokio::test]
async fn a_redis_available_changed_behind_its_back_fails_stores_agree() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_ok(1, "x", 1, 2).await;
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    app.redis_incr_available(1, 3).await;
    let report = audit(&app).await;
    assert_eq!(
        report.failed(),
        [invariants::STORES_AGREE],
        "{}",
        report.table()
    );
    let check = report.check(invariants::STORES_AGREE).unwrap();
    assert_eq!(check.violations, 1);
    assert!(check.details[0].contains("Redis available 11 != MySQL available_stock 8"));
    let run = app.stockd(&["audit", "--json"], &[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let json = run.json();
    assert_eq!(json["ok"], false);
    let failed: Vec<&str> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(failed, [invariants::STORES_AGREE]);
    app.cleanup().await;
}

/// A buyer holds more than `limit_per_user` in both stores (conservation kept
/// by raising total_stock): only `buyer_limit` fails, naming the buyer.
#[tokio::test]
async fn a_buyer_over_the_limit_fails_buyer_limit_only() {
    let app = TestApp::spawn_with_sku(1, 10, 1).await;
    app.reserve_ok(1, "first", 7, 1).await;
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    // A second live unit for buyer 7, as if both stores had admitted it.
    let now_ms = app.res.redis.now_ms().await.unwrap();
    let expires_ms = now_ms + 900_000;
    app.sql(&format!(
        "INSERT INTO stock_deduct_idempotent
           (sku_id, deduct_request_id, user_id, deduct_count, status, reserved_at_ms, expires_at_ms)
         VALUES (1, 'extra', 7, 1, 'RESERVED', {now_ms}, {expires_ms})"
    ))
    .await;
    app.sql("UPDATE sku_stock SET total_stock = total_stock + 1 WHERE sku_id = 1")
        .await;
    let keys = app.res.redis.keys();
    let sku = TestApp::sku(1);
    let rid = stockd::domain::RequestId::parse("extra").unwrap();
    let record = keys.reservation(sku, &rid);
    let (created, expires) = (now_ms.to_string(), expires_ms.to_string());
    app.redis_cmd(&[
        "HSET",
        &record,
        "user",
        "7",
        "count",
        "1",
        "status",
        "RESERVED",
        "created_ms",
        &created,
        "expires_ms",
        &expires,
    ])
    .await;
    app.redis_cmd(&["SADD", &keys.winners(sku), "extra"]).await;
    let user = keys.user(sku, stockd::domain::UserId::new(7).unwrap());
    app.redis_cmd(&["HINCRBY", &user, "n", "1"]).await;
    let report = audit(&app).await;
    assert_eq!(
        report.failed(),
        [invariants::BUYER_LIMIT],
        "{}",
        report.table()
    );
    let check = report.check(invariants::BUYER_LIMIT).unwrap();
    assert_eq!(check.violations, 1);
    assert_eq!(
        check.details,
        ["sku 1 user 7: 2 live units > limit_per_user 1"]
    );
    app.cleanup().await;
}

/// Redis lost a reservation record MySQL holds live: `ledger_in_redis` fails
/// (a replay of that request would be admitted again).
#[tokio::test]
async fn a_lost_reservation_record_fails_ledger_in_redis() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_ok(1, "kept", 1, 1).await;
    app.reserve_ok(1, "lost", 2, 2).await;
    app.wait_ledger_rows(2).await;
    app.wait_drained(1).await;
    let rid = stockd::domain::RequestId::parse("lost").unwrap();
    let record = app.res.redis.keys().reservation(TestApp::sku(1), &rid);
    app.redis_cmd(&["DEL", &record]).await;
    let report = audit(&app).await;
    assert_eq!(
        report.failed(),
        [invariants::LEDGER_IN_REDIS],
        "{}",
        report.table()
    );
    let check = report.check(invariants::LEDGER_IN_REDIS).unwrap();
    assert_eq!(check.violations, 1);
    assert!(
        check.details[0].contains("request lost user 2 count 2 (RESERVED): no Redis record"),
        "{check:?}"
    );
    app.cleanup().await;
}

/// A poison message the consumer dead-lettered fails `dlq_empty`, with the
/// broker's reason.
#[tokio::test]
async fn a_dead_lettered_message_fails_dlq_empty() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.publish_raw(b"{\"not\":\"a deduction\"}").await;
    app.eventually("poison dead-lettered", Duration::from_secs(20), || async {
        app.dlq_depth().await == 1
    })
    .await;
    let report = audit(&app).await;
    assert_eq!(
        report.failed(),
        [invariants::DLQ_EMPTY],
        "{}",
        report.table()
    );
    let check = report.check(invariants::DLQ_EMPTY).unwrap();
    assert_eq!(check.violations, 1);
    assert!(check.details[0].contains("poison message"), "{check:?}");
    // The consumer dead-lettered it itself, with the reason in `x-stockd-reason`.
    assert!(check.details[0].contains("reason poison"), "{check:?}");
    // Browsing returned it: still there for the operator.
    assert_eq!(app.dlq_depth().await, 1);
    // A SKU-filtered audit does not count a message that belongs to no SKU.
    let scoped = invariants::run(&app.res, &[TestApp::sku(1)], &mut |_, _| {})
        .await
        .unwrap();
    assert!(scoped.ok, "{}", scoped.table());
    app.cleanup().await;
}

/// A store that cannot be reached is exit code 2, not a verdict.
#[tokio::test]
async fn an_unreachable_store_exits_2() {
    let app = TestApp::spawn().await;
    let run = app
        .stockd(
            &["audit"],
            &[
                ("STOCKD__REDIS__MODE", "standalone"),
                ("STOCKD__REDIS__URLS", ""),
                ("STOCKD__REDIS__URL", "redis://127.0.0.1:1"),
            ],
        )
        .await;
    assert_eq!(run.code, 2, "{run:?}");
    let run = app.stockd(&["audit", "--sku", "0"], &[]).await;
    assert_eq!(run.code, 2, "{run:?}");
    app.cleanup().await;
}
