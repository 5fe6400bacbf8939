//! The hold budget per buyer (`limits.buyer_max_live_units`, contract §12;
//! OWASP OAT-021, denial of inventory): a buyer's live units across every
//! SKU, single reservations and order lines together, are held to the
//! budget (409 `HOLD_BUDGET_EXCEEDED`, nothing held); the budget comes back
//! when a hold is cancelled, confirmed or expires, or when the admission
//! refuses it; a retry of the same id claims nothing twice; a warm-up
//! rebuilds it from MySQL; off, no key is written.
//!
//! The budget lives in the buyer's own key (`{u:<user_id>}`), so on a Redis
//! Cluster (`make test-cluster`) these tests cover its separate slot, and the
//! orders are held line by line there.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;
use serde_json::Value;

use crate::helpers::http::order_body;
use crate::helpers::{TestApp, TestOptions};
use crate::orders_intents::{hold, intent};
use stockd::domain::{RequestId, UserId};
use stockd::ops::order_sweeper::sweep_once;
use stockd::redis::order_holds::LineHold;
use stockd::redis::{BudgetLine, ClaimOutcome, Keys};

/// How long a 3 s hold may take to lapse: the delay queue, the closer, a
/// busy machine.
const LAPSE: Duration = Duration::from_secs(30);

/// The app with a budget of `units` live units per buyer.
async fn app_with_budget(units: u32) -> TestApp {
    TestApp::with(TestOptions {
        tweak: Some(Arc::new(move |s| s.limits.buyer_max_live_units = units)),
        ..TestOptions::default()
    })
    .await
}

/// The buyer's live units as the budget counts them (`t`), `None` when the
/// buyer has no budget key.
async fn live_units(app: &TestApp, user: u64) -> Option<i64> {
    let key = Keys::new(&app.direct_settings.redis.key_prefix).budget(UserId::new(user).unwrap());
    let mut conn = app.redis_conn().await;
    redis::cmd("HGET")
        .arg(&key)
        .arg("t")
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// Whether the buyer's budget key exists.
async fn has_budget_key(app: &TestApp, user: u64) -> bool {
    let key = Keys::new(&app.direct_settings.redis.key_prefix).budget(UserId::new(user).unwrap());
    let mut conn = app.redis_conn().await;
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    exists == 1
}

/// The answer's status and body.
async fn answer(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Asserts a 409 `HOLD_BUDGET_EXCEEDED` telling `live` units of `budget`.
fn assert_over(status: u16, body: &Value, live: i64, budget: i64) {
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "HOLD_BUDGET_EXCEEDED", "{body}");
    assert_eq!(
        (body["live_units"].as_i64(), body["budget"].as_i64()),
        (Some(live), Some(budget)),
        "{body}"
    );
}

/// Budget 3: 2 units on SKU 1 and 1 on SKU 2 fill it; a reservation on SKU
/// 3 is refused with nothing held; one that is also over SKU 2's limit is
/// `LIMIT_EXCEEDED` (the per-SKU limit wins, contract §12), an order too,
/// naming the line; retries of the admitted ids replay (200) and claim
/// nothing twice; another buyer is not concerned.
#[tokio::test]
async fn the_budget_refuses_beyond_it_across_two_skus_and_a_retry_claims_nothing_twice() {
    let app = app_with_budget(3).await;
    app.create_sku(1, 10, 5).await;
    app.create_sku(2, 10, 1).await;
    app.create_sku(3, 10, 5).await;
    app.reserve_taken(1, "a", 1, 2).await;
    app.reserve_taken(2, "b", 1, 1).await;
    assert_eq!(live_units(&app, 1).await, Some(3));

    let (status, body) = answer(app.reserve(3, "c", 1, 1).await).await;
    assert_over(status, &body, 3, 3);
    assert_eq!(app.redis_available(3).await, Some(10), "nothing held");
    let (status, _) = app.get_json("/v1/skus/3/reservations/c").await;
    assert_eq!(status, 404, "no record of the refused id");

    let (status, body) = answer(app.reserve(2, "c2", 1, 1).await).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED")),
        "{body}"
    );
    let (status, body) = app
        .place_order(&order_body("o", 1, &[(2, 1), (3, 1)]))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED")),
        "{body}"
    );
    assert_eq!(body["line"]["sku_id"], 2, "{body}");
    assert_eq!(app.redis_available(2).await, Some(9), "nothing more held");

    for (sku, rid, count) in [(1, "a", 2), (2, "b", 1)] {
        let replay = app.reserve(sku, rid, 1, count).await;
        assert_eq!(replay.status(), 200, "{rid} replays at the budget");
    }
    assert_eq!(live_units(&app, 1).await, Some(3), "no retry claimed twice");
    app.reserve_taken(1, "d", 2, 3).await;
    assert_eq!(live_units(&app, 2).await, Some(3));
    app.wait_drained(2).await;
    app.wait_drained(3).await;
    app.finish_drained_and_conserved(1).await;
}

/// Order lines count with single reservations: an order over the budget is
/// refused whole (no `line` member), nothing held on any SKU; its retry
/// replays; a cancelled order gives its lines back.
#[tokio::test]
async fn order_lines_share_the_budget_with_reservations_and_a_cancel_gives_them_back() {
    let app = app_with_budget(3).await;
    for sku in [1, 2, 3] {
        app.create_sku(sku, 10, 5).await;
    }
    let (status, body) = app
        .place_order(&order_body("o1", 1, &[(1, 1), (2, 1)]))
        .await;
    assert_eq!(status, 201, "{body}");
    app.reserve_taken(3, "s1", 1, 1).await;
    assert_eq!(live_units(&app, 1).await, Some(3));

    let (status, body) = app
        .place_order(&order_body("o2", 1, &[(1, 1), (3, 1)]))
        .await;
    assert_over(status, &body, 3, 3);
    assert!(body.get("line").is_none(), "{body}");
    for (sku, left) in [(1, 9), (2, 9), (3, 9)] {
        assert_eq!(app.redis_available(sku).await, Some(left), "SKU {sku}");
    }
    let (status, body) = app
        .place_order(&order_body("o1", 1, &[(1, 1), (2, 1)]))
        .await;
    assert_eq!(status, 200, "a replay at the budget: {body}");
    assert_eq!(live_units(&app, 1).await, Some(3));

    assert_eq!(app.post_json("/v1/orders/o1/cancel").await.0, 200);
    assert_eq!(live_units(&app, 1).await, Some(1), "both lines given back");
    let (status, body) = app
        .place_order(&order_body("o2", 1, &[(1, 1), (3, 1)]))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(live_units(&app, 1).await, Some(3));
    for sku in [1, 2, 3] {
        app.wait_drained(sku).await;
        app.assert_conserved(sku).await;
    }
    app.cleanup().await;
}

/// A cancel and a confirm end a hold: its units come back to the budget
/// (the key goes with the last), and the buyer may hold again.
#[tokio::test]
async fn a_cancel_and_a_confirm_give_the_units_back() {
    let app = app_with_budget(2).await;
    app.create_sku(1, 10, 5).await;
    app.reserve_taken(1, "a", 1, 2).await;
    let (status, body) = answer(app.reserve(1, "b", 1, 2).await).await;
    assert_over(status, &body, 2, 2);

    assert_eq!(app.cancel(1, "a").await.0, 200);
    assert!(!has_budget_key(&app, 1).await, "the last unit took the key");
    app.reserve_taken(1, "b", 1, 2).await;
    assert_eq!(live_units(&app, 1).await, Some(2));
    assert_eq!(app.confirm(1, "b").await.0, 200);
    assert!(!has_budget_key(&app, 1).await);
    // A second cancel of a given-back hold gives nothing back twice.
    assert_eq!(app.cancel(1, "a").await.0, 200);
    app.reserve_taken(1, "c", 1, 2).await;
    assert_eq!(live_units(&app, 1).await, Some(2));
    app.finish_drained_and_conserved(1).await;
}

/// Holds that lapse unpaid are released by the closer, and their units come
/// back to each buyer's budget with the release's mirror.
#[tokio::test]
async fn an_expiry_gives_the_units_back() {
    let app = TestApp::with(TestOptions {
        closer: true,
        ttl_secs: 3,
        tweak: Some(Arc::new(|s| {
            s.closer.grace_ms = 0;
            s.limits.buyer_max_live_units = 1;
        })),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    app.reserve_taken(1, "a", 1, 1).await;
    // Other buyers' holds lapse in the same batch of the closer.
    for user in [2, 3, 4] {
        app.reserve_taken(1, &format!("e{user}"), user, 1).await;
    }
    let (status, body) = answer(app.reserve(1, "b", 1, 1).await).await;
    assert_over(status, &body, 1, 1);
    app.eventually("the holds expired and given back", LAPSE, || async {
        let mut done = app.ledger_status(1, "a").await.as_deref() == Some("RELEASED");
        for user in [1, 2, 3, 4] {
            done = done && !has_budget_key(&app, user).await;
        }
        done
    })
    .await;
    app.reserve_taken(1, "b", 1, 1).await;
    app.wait_drained(1).await;
    app.eventually("b expired", LAPSE, || async {
        app.ledger_status(1, "b").await.as_deref() == Some("RELEASED")
    })
    .await;
    app.finish_drained_and_conserved(1).await;
}

/// The admission refuses (stock, the per-SKU limit, an order's line): what
/// the hold claimed is given back, so the buyer's budget is as before.
#[tokio::test]
async fn a_refusal_by_the_admission_gives_the_claim_back() {
    let app = app_with_budget(5).await;
    app.create_sku(1, 2, 5).await;
    app.create_sku(2, 10, 1).await;
    let (status, body) = answer(app.reserve(1, "a", 1, 3).await).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("INSUFFICIENT_STOCK"))
    );
    assert!(!has_budget_key(&app, 1).await, "the claim went back");
    let (status, body) = answer(app.reserve(2, "b", 1, 2).await).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED"))
    );
    assert!(!has_budget_key(&app, 1).await);
    app.reserve_taken(2, "c", 1, 1).await;
    let (status, body) = app
        .place_order(&order_body("o1", 1, &[(1, 1), (2, 1)]))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("LIMIT_EXCEEDED")),
        "{body}"
    );
    assert_eq!(live_units(&app, 1).await, Some(1), "only c's unit");
    app.wait_drained(1).await;
    app.finish_drained_and_conserved(2).await;
}

/// Off (the default): reservations and orders write no budget key.
#[tokio::test]
async fn with_the_budget_off_no_key_is_written() {
    let app = TestApp::spawn().await;
    app.create_sku(1, 10, 5).await;
    app.reserve_taken(1, "a", 1, 3).await;
    let (status, body) = app.place_order(&order_body("o1", 1, &[(1, 1)])).await;
    assert_eq!(status, 201, "{body}");
    assert!(!has_budget_key(&app, 1).await);
    let budget = Keys::new(&app.direct_settings.redis.key_prefix).budget(UserId::new(1).unwrap());
    assert!(!app.redis_keys().await.contains(&budget));
    app.finish_drained_and_conserved(1).await;
}

/// Redis lost everything: the warm-up rebuilds the buyer's budget from
/// MySQL's live holds (a reservation and an order's line), so it still
/// refuses; a second warm-up counts nothing twice.
#[tokio::test]
async fn warm_up_after_redis_lost_everything_rebuilds_the_budget() {
    let app = app_with_budget(3).await;
    app.create_sku(1, 10, 5).await;
    app.reserve_taken(1, "a", 1, 2).await;
    let (status, body) = app.place_order(&order_body("o1", 1, &[(1, 1)])).await;
    assert_eq!(status, 201, "{body}");
    app.eventually("the holds in MySQL", LAPSE, || async {
        app.ledger_status(1, "a").await.is_some() && app.ledger_status(1, "o1").await.is_some()
    })
    .await;
    app.wait_drained(1).await;
    let keys = app.redis_keys().await;
    app.redis_del(&keys).await;
    assert!(!has_budget_key(&app, 1).await);
    for _ in 0..2 {
        let warmed = app.post_admin("/v1/admin/skus/1/warmup").await;
        assert_eq!(warmed.status(), 200, "{:?}", warmed.text().await);
        assert_eq!(live_units(&app, 1).await, Some(3), "rebuilt from MySQL");
    }
    let (status, body) = answer(app.reserve(1, "b", 1, 1).await).await;
    assert_over(status, &body, 3, 3);
    assert_eq!(app.reserve(1, "a", 1, 2).await.status(), 200, "a replay");
    app.finish_drained_and_conserved(1).await;
}

/// A claim whose hold never came (the api died between the claim and the
/// admission) is dropped once its deadline passed, the next time it would
/// refuse its buyer; one still within its deadline keeps counting.
#[tokio::test]
async fn a_claim_whose_hold_never_came_is_dropped_past_its_deadline() {
    let app = app_with_budget(3).await;
    app.create_sku(1, 10, 5).await;
    let key = Keys::new(&app.direct_settings.redis.key_prefix).budget(UserId::new(1).unwrap());
    let far = stockd::clock::unix_ms() + 3_600_000;
    let mut conn = app.redis_conn().await;
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("t")
        .arg(3)
        .arg("9:lost")
        .arg("2:1")
        .arg("9:pending")
        .arg(format!("1:{far}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    app.reserve_taken(1, "a", 1, 2).await;
    assert_eq!(live_units(&app, 1).await, Some(3), "the stale claim went");
    let (status, body) = answer(app.reserve(1, "b", 1, 1).await).await;
    assert_over(status, &body, 3, 3);
    app.finish_drained_and_conserved(1).await;
}

/// An api that claimed an order's budget, held a line by the intent way and
/// died: the sweeper's undo of the attempt gives the claim back too.
#[tokio::test]
async fn the_sweepers_undo_of_a_dead_apis_order_gives_its_claim_back() {
    let app = TestApp::with(TestOptions {
        tweak: Some(Arc::new(|s| {
            s.orders.hold_timeout_ms = 100;
            s.orders.sweep_interval_ms = 3_600_000;
            s.limits.buyer_max_live_units = 3;
        })),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let of = TestApp::order_lines(&[(1, 1), (2, 2)]);
    let lines: Vec<BudgetLine> = (of.lines().iter())
        .map(|line| BudgetLine {
            sku_id: line.sku_id,
            hold_id: RequestId::parse("dead").unwrap(),
            units: line.count,
        })
        .collect();
    let user = UserId::new(3).unwrap();
    let claimed = app.res.redis.budget().claim(user, &lines).await.unwrap();
    assert!(
        matches!(claimed, ClaimOutcome::Claimed { live: 3, .. }),
        "{claimed:?}"
    );
    let attempt = intent(&app, "dead", 3, &of).await;
    assert!(matches!(
        hold(&app, &attempt, 1, 1).await,
        LineHold::Held { .. }
    ));
    // The record's own deadline (100 ms) decides the sweeper's abort.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let swept = sweep_once(&app.res.redis, &app.res.db).await.unwrap();
    assert_eq!(swept.undone, 1);
    assert!(!has_budget_key(&app, 3).await, "the claim went back");
    app.cleanup().await;
}
