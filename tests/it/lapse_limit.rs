//! The cap on churned holds (`limits.max_lapsed_holds`, contract §2 step 5,
//! §12; OWASP OAT-021, denial of inventory): every hold of a buyer on a SKU
//! that lapsed unpaid (an expiry, not a cancel, not a confirm) counts in the
//! buyer's hash (`x`); a buyer whose count reached the cap is refused a new
//! reservation or order line on that SKU with 409 `LAPSE_LIMIT`, nothing
//! held, while a replay of an id admitted before still answers 200.
//!
//! On a Redis Cluster (`make test-cluster`) the order lines are held line by
//! line (`order_hold.lua`), so the order test covers that path there.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;
use serde_json::Value;

use crate::helpers::http::order_body;
use crate::helpers::{TestApp, TestOptions};
use stockd::domain::{SkuId, UserId};
use stockd::redis::Keys;

/// How long a 3 s hold may take to lapse: the delay queue, the closer, a
/// busy machine.
const LAPSE: Duration = Duration::from_secs(30);

/// A closer that releases 3 s holds at once, and a cap of 2 lapsed holds.
/// Short enough that a lapse comes soon; long enough that a hold the test
/// confirms or cancels is decided before it lapses on a loaded machine (with
/// 1 s, the consumer's hand-off and two HTTP calls under CI's load could
/// outlast the hold).
fn options() -> TestOptions {
    TestOptions {
        closer: true,
        ttl_secs: 3,
        tweak: Some(Arc::new(|s| {
            s.closer.grace_ms = 0;
            s.limits.max_lapsed_holds = 2;
        })),
        ..TestOptions::default()
    }
}

/// The buyer's lapsed holds on the SKU as Redis counts them (`x`).
async fn lapsed(app: &TestApp, sku: u64, user: u64) -> Option<i64> {
    let key = Keys::new(&app.direct_settings.redis.key_prefix)
        .user(SkuId::new(sku).unwrap(), UserId::new(user).unwrap());
    let mut conn = app.redis_conn().await;
    redis::cmd("HGET")
        .arg(&key)
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// Waits until the ledger row `rid` of `sku` is released as expired and the
/// release is mirrored to Redis (the buyer's count reached `count`).
async fn wait_lapsed(app: &TestApp, sku: u64, rid: &str, user: u64, count: i64) {
    app.eventually(&format!("{rid} lapsed"), LAPSE, || async {
        app.ledger_status(sku, rid).await.as_deref() == Some("RELEASED")
            && lapsed(app, sku, user).await == Some(count)
    })
    .await;
}

/// The answer's status and problem code.
async fn code_of(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    (
        status,
        body["code"].as_str().unwrap_or_default().to_string(),
    )
}

/// Two lapsed holds: the third reservation of that buyer on that SKU is 409
/// LAPSE_LIMIT and changes nothing in Redis or MySQL; replays of the lapsed
/// ids still answer 200; another buyer is served; cancels and a confirm do
/// not count; the lapses are counted in `stockd_holds_lapsed_total`.
#[tokio::test]
async fn a_buyer_whose_holds_lapsed_twice_is_refused_the_third_and_others_are_not() {
    let app = TestApp::with(options()).await;
    app.create_sku(1, 10, 5).await;
    app.reserve_taken(1, "a1", 1, 1).await;
    wait_lapsed(&app, 1, "a1", 1, 1).await;
    app.reserve_taken(1, "a2", 1, 1).await;
    wait_lapsed(&app, 1, "a2", 1, 2).await;
    app.wait_drained(1).await;

    let rows_before = app.ledger_rows_of(1).await;
    let available_before = (app.redis_available(1).await, app.mysql_available(1).await);
    assert_eq!(available_before, (Some(10), Some(10)));
    assert_eq!(
        code_of(app.reserve(1, "a3", 1, 1).await).await,
        (409, "LAPSE_LIMIT".to_string())
    );
    let record = Keys::new(&app.direct_settings.redis.key_prefix).reservation(
        SkuId::new(1).unwrap(),
        &stockd::domain::RequestId::parse("a3").unwrap(),
    );
    let mut conn = app.redis_conn().await;
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&record)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "no record of the refused id");
    assert_eq!(
        (app.redis_available(1).await, app.mysql_available(1).await),
        available_before,
        "nothing held"
    );
    assert_eq!(
        lapsed(&app, 1, 1).await,
        Some(2),
        "a refusal counts nothing"
    );

    // A replay of an id admitted before is answered as before.
    let replay = app.reserve(1, "a2", 1, 1).await;
    assert_eq!(replay.status(), 200);
    let body: Value = replay.json().await.unwrap();
    assert_eq!(body["status"], "RELEASED");

    // Another buyer, and cancels and a confirm, which are not lapses.
    app.reserve_taken(1, "b1", 2, 1).await;
    for rid in ["c1", "c2"] {
        app.reserve_taken(1, rid, 3, 1).await;
        assert_eq!(app.cancel(1, rid).await.0, 200, "cancel {rid}");
    }
    app.reserve_taken(1, "c3", 3, 1).await;
    app.eventually("c3 in MySQL", LAPSE, || async {
        app.ledger_status(1, "c3").await.is_some()
    })
    .await;
    assert_eq!(app.confirm(1, "c3").await.0, 200);
    app.reserve_taken(1, "c4", 3, 1).await;
    assert_eq!(
        lapsed(&app, 1, 3).await,
        None,
        "cancels and confirms never lapse"
    );
    assert_eq!(app.confirm(1, "c4").await.0, 200);
    assert_eq!(app.confirm(1, "b1").await.0, 200);
    app.eventually("every row in MySQL", LAPSE, || async {
        app.ledger_rows_of(1).await == rows_before + 5
    })
    .await;

    let metrics = app.metrics_text().await;
    let counted: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("stockd_holds_lapsed_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0);
    assert!(counted >= 2.0, "stockd_holds_lapsed_total: {counted}");
    app.finish_drained_and_conserved(1).await;
}

/// A cap of 0 (the default) refuses nothing: the lapses are still counted.
#[tokio::test]
async fn with_the_cap_off_lapsed_holds_are_counted_and_nothing_is_refused() {
    let app = TestApp::with(TestOptions {
        tweak: Some(Arc::new(|s| s.closer.grace_ms = 0)),
        ..options()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    for (i, rid) in ["d1", "d2", "d3"].into_iter().enumerate() {
        app.reserve_taken(1, rid, 1, 1).await;
        wait_lapsed(&app, 1, rid, 1, i as i64 + 1).await;
    }
    app.reserve_taken(1, "d4", 1, 1).await;
    assert_eq!(app.confirm(1, "d4").await.0, 200);
    app.finish_drained_and_conserved(1).await;
}

/// Order lines lapse like reservations and count on their SKU: after two
/// orders lapsed, an order with a line on that SKU is 409 LAPSE_LIMIT naming
/// the line, nothing held, and so is a single reservation there; an order of
/// the buyer on another SKU and another buyer's order are held; a replay of a
/// lapsed order answers 200; cancelled orders do not count.
#[tokio::test]
async fn order_lines_lapse_and_count_like_reservations() {
    let app = TestApp::with(options()).await;
    for sku in [1, 2, 3] {
        app.create_sku(sku, 10, 5).await;
    }
    for (i, id) in ["o1", "o2"].into_iter().enumerate() {
        assert_eq!(
            app.place_order(&order_body(id, 1, &[(1, 1), (2, 1)]))
                .await
                .0,
            201
        );
        wait_lapsed(&app, 1, id, 1, i as i64 + 1).await;
        wait_lapsed(&app, 2, id, 1, i as i64 + 1).await;
    }
    for sku in [1, 2] {
        app.wait_drained(sku).await;
    }
    let rows_before = app.ledger_rows().await;

    let (status, body) = app
        .place_order(&order_body("o3", 1, &[(2, 1), (3, 1)]))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("LAPSE_LIMIT")),
        "{body}"
    );
    assert_eq!(body["line"]["sku_id"], 2, "{body}");
    assert_eq!(
        code_of(app.reserve(1, "s1", 1, 1).await).await,
        (409, "LAPSE_LIMIT".to_string()),
        "a single reservation shares the count"
    );
    for sku in [1, 2, 3] {
        assert_eq!(
            (
                app.redis_available(sku).await,
                app.mysql_available(sku).await
            ),
            (Some(10), Some(10)),
            "nothing held on SKU {sku}"
        );
    }
    assert_eq!(app.ledger_rows().await, rows_before);
    let (replayed, body) = app
        .place_order(&order_body("o2", 1, &[(1, 1), (2, 1)]))
        .await;
    assert_eq!(replayed, 200, "{body}");

    // The buyer on a SKU without lapses; another buyer; cancels do not count.
    assert_eq!(
        app.place_order(&order_body("o4", 1, &[(3, 1)])).await.0,
        201
    );
    for id in ["p1", "p2", "p3"] {
        assert_eq!(
            app.place_order(&order_body(id, 2, &[(1, 1), (2, 1)]))
                .await
                .0,
            201
        );
        app.eventually(&format!("{id} in MySQL"), LAPSE, || async {
            app.ledger_status(1, id).await.is_some()
        })
        .await;
        assert_eq!(
            app.post_json(&format!("/v1/orders/{id}/cancel")).await.0,
            200
        );
    }
    assert_eq!(
        app.place_order(&order_body("p4", 2, &[(1, 1), (2, 1)]))
            .await
            .0,
        201
    );
    assert_eq!(lapsed(&app, 1, 2).await, None);
    app.eventually("o4, p4 in MySQL", LAPSE, || async {
        app.ledger_status(3, "o4").await.is_some() && app.ledger_status(1, "p4").await.is_some()
    })
    .await;
    assert_eq!(app.post_json("/v1/orders/o4/confirm").await.0, 200);
    assert_eq!(app.post_json("/v1/orders/p4/confirm").await.0, 200);
    for sku in [1, 2, 3] {
        app.wait_drained(sku).await;
        app.assert_conserved(sku).await;
    }
    app.cleanup().await;
}

/// Redis lost everything: the warm-up rebuilds the lapse counts from
/// MySQL's EXPIRED rows of the replay window, so the cap still holds.
#[tokio::test]
async fn warm_up_after_redis_lost_everything_rebuilds_the_lapse_counts() {
    let app = TestApp::with(options()).await;
    app.create_sku(1, 10, 5).await;
    for (i, rid) in ["e1", "e2"].into_iter().enumerate() {
        app.reserve_taken(1, rid, 1, 1).await;
        wait_lapsed(&app, 1, rid, 1, i as i64 + 1).await;
    }
    app.wait_drained(1).await;
    let keys = app.redis_keys().await;
    app.redis_del(&keys).await;
    let warmed = app.post_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(warmed.status(), 200, "{:?}", warmed.text().await);
    assert_eq!(lapsed(&app, 1, 1).await, Some(2), "rebuilt from MySQL");
    assert_eq!(
        code_of(app.reserve(1, "e3", 1, 1).await).await,
        (409, "LAPSE_LIMIT".to_string())
    );
    assert_eq!(app.reserve(1, "e2", 1, 1).await.status(), 200, "a replay");
    // A second warm-up counts nothing twice.
    let again = app.post_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(again.status(), 200, "{:?}", again.text().await);
    assert_eq!(lapsed(&app, 1, 1).await, Some(2));
    app.finish_drained_and_conserved(1).await;
}
