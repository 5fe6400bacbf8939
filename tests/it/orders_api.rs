//! The order routes over HTTP (`POST /v1/orders`, `GET`, confirm, cancel,
//! extend): every line held or none, in Redis and in MySQL; replays and
//! mismatches; limits across lines and single reservations; the whole
//! order's lifecycle; bad input refused before anything is held; the
//! sold-out short-circuit; and buyers racing for the last units of two SKUs.
//!
//! On a standalone Redis the order script holds an order; in `make
//! test-cluster` the same tests run on the local Redis Cluster, where the
//! lines (SKUs 1, 2, 3, ... hash to different slots) are held line by line
//! under an intent (`ops/order_saga.rs`).

use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::{json, Value};

use crate::helpers::http::order_body as order;
use crate::helpers::{PrivateRedis, TestApp, TestOptions};
use stockd::domain::RequestId;

fn options(ttl_secs: u64) -> TestOptions {
    TestOptions {
        ttl_secs,
        tweak: Some(Arc::new(|s| s.closer.grace_ms = 0)),
        ..TestOptions::default()
    }
}

async fn place(app: &TestApp, body: &Value) -> (u16, Value, reqwest::header::HeaderMap) {
    place_at(app, &app.base, body).await
}

/// [`place`] on the api node at `base`.
async fn place_at(
    app: &TestApp,
    base: &str,
    body: &Value,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let resp = app
        .client
        .post(format!("{base}/v1/orders"))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, resp.json().await.unwrap(), headers)
}

async fn order_row(app: &TestApp, order_id: &str) -> Option<(String, Option<String>)> {
    let mut db = app.mysql().await;
    db.exec_first(
        "SELECT status, reason FROM orders WHERE order_id = ?",
        (order_id,),
    )
    .await
    .unwrap()
}

/// Waits until the consumer wrote the order row.
async fn wait_order_row(app: &TestApp, order_id: &str) {
    app.eventually(
        &format!("order {order_id} in MySQL"),
        Duration::from_secs(20),
        || async { order_row(app, order_id).await.is_some() },
    )
    .await;
}

async fn both_available(app: &TestApp, sku: u64) -> (Option<i64>, Option<i64>) {
    (
        app.redis_available(sku).await,
        app.mysql_available(sku).await,
    )
}

async fn finish(app: TestApp, skus: &[u64]) {
    for &sku in skus {
        app.wait_drained(sku).await;
        app.assert_conserved(sku).await;
    }
    app.cleanup().await;
}

/// 201 with every line and a Location; GET shows it persisted; an identical
/// replay is 200 with `Idempotent-Replayed`; other lines or another buyer
/// under the same id are 422; MySQL has the order row and a ledger row per
/// line; confirm decides the whole order, a repeat is 200, a cancel 409.
#[tokio::test]
async fn an_order_is_held_whole_replayed_and_confirmed_whole() {
    let app = TestApp::with(options(900)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let body = order("cart-1", 9, &[(2, 1), (1, 2)]);
    let (status, placed, headers) = place(&app, &body).await;
    assert_eq!(status, 201, "{placed}");
    assert_eq!(headers["location"], "/v1/orders/cart-1");
    assert_eq!(placed["status"], "RESERVED");
    assert_eq!(
        placed["lines"],
        json!([{"sku_id": 1, "count": 2}, {"sku_id": 2, "count": 1}])
    );
    assert_eq!(both_available(&app, 1).await.0, Some(3));
    wait_order_row(&app, "cart-1").await;
    assert_eq!(
        app.ledger_status(1, "cart-1").await.as_deref(),
        Some("RESERVED")
    );
    assert_eq!(
        app.ledger_status(2, "cart-1").await.as_deref(),
        Some("RESERVED")
    );
    // The order's one outbox entry is removed once the broker confirmed it
    // (else the relay would republish it every pass).
    let shard = stockd::redis::keys::order_shard(&RequestId::parse("cart-1").unwrap());
    let stream = app.res.redis.keys().order_outbox(shard);
    app.eventually(
        "the order's outbox entry removed",
        Duration::from_secs(10),
        || async {
            let mut conn = app.redis_conn().await;
            let len: u64 = deadpool_redis::redis::cmd("XLEN")
                .arg(&stream)
                .query_async(&mut conn)
                .await
                .unwrap();
            len == 0
        },
    )
    .await;
    let (status, read) = app.get_json("/v1/orders/cart-1").await;
    assert_eq!((status, read["persisted"].as_bool()), (200, Some(true)));
    assert_eq!(read["expires_at"], placed["expires_at"]);

    let (status, replay, headers) = place(&app, &body).await;
    assert_eq!(status, 200);
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(replay["expires_at"], placed["expires_at"]);
    for other in [
        order("cart-1", 9, &[(1, 2)]),
        order("cart-1", 9, &[(1, 2), (2, 2)]),
        order("cart-1", 10, &[(1, 2), (2, 1)]),
    ] {
        let (status, problem, _) = place(&app, &other).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (422, Some("IDEMPOTENCY_MISMATCH")),
            "{other}"
        );
    }
    assert_eq!(
        both_available(&app, 1).await.0,
        Some(3),
        "nothing more held"
    );

    let (status, confirmed) = app.post_json("/v1/orders/cart-1/confirm").await;
    assert_eq!(
        (status, confirmed["status"].as_str()),
        (200, Some("CONFIRMED"))
    );
    assert_eq!(app.post_json("/v1/orders/cart-1/confirm").await.0, 200);
    let (status, problem) = app.post_json("/v1/orders/cart-1/cancel").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("RESERVATION_CONFIRMED"))
    );
    for sku in [1, 2] {
        assert_eq!(
            app.ledger_status(sku, "cart-1").await.as_deref(),
            Some("CONFIRMED")
        );
    }
    let (_, replay, _) = place(&app, &body).await;
    assert_eq!(
        replay["status"], "CONFIRMED",
        "a replay answers the stored order"
    );
    finish(app, &[1, 2]).await;
}

/// Redis lost the order record while its lines' records are there (a
/// warm-up rebuilds the lines from the ledger, not the order record): the
/// script alone would call the buyer's retry a mismatch; the api finds the
/// same order in MySQL and answers it as a replay. Another buyer under the
/// id is still 422, and nothing more is held.
#[tokio::test]
async fn a_replay_after_redis_lost_the_order_record_answers_from_mysql() {
    let app = TestApp::with(options(900)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let body = order("cart-lost", 9, &[(1, 2), (2, 1)]);
    let (status, placed, _) = place(&app, &body).await;
    assert_eq!(status, 201, "{placed}");
    wait_order_row(&app, "cart-lost").await;
    let key = app
        .res
        .redis
        .keys()
        .order(&stockd::domain::RequestId::parse("cart-lost").unwrap());
    let mut conn = app.redis_conn().await;
    let deleted: i64 = deadpool_redis::redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(deleted, 1, "the order record {key} was there");

    let (status, replay, headers) = place(&app, &body).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(replay["status"], "RESERVED");
    assert_eq!(replay["expires_at"], placed["expires_at"]);
    let (status, problem, _) = place(&app, &order("cart-lost", 10, &[(1, 2), (2, 1)])).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (422, Some("IDEMPOTENCY_MISMATCH"))
    );
    assert_eq!(both_available(&app, 1).await, (Some(3), Some(3)));
    assert_eq!(both_available(&app, 2).await, (Some(4), Some(4)));
    finish(app, &[1, 2]).await;
}

/// One line short: 409 naming that line and why; nothing held in Redis,
/// nothing written to MySQL; the same for a line over the buyer's limit,
/// counted together with the buyer's single reservation of that SKU.
#[tokio::test]
async fn an_order_with_one_line_short_holds_nothing_in_either_store() {
    let app = TestApp::with(options(900)).await;
    app.create_sku(1, 5, 2).await;
    app.create_sku(2, 1, 5).await;
    let (status, problem, _) = place(&app, &order("short", 3, &[(1, 1), (2, 2)])).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(problem["code"], "INSUFFICIENT_STOCK");
    assert_eq!(
        problem["line"],
        json!({"sku_id": 2, "code": "INSUFFICIENT_STOCK"})
    );

    app.reserve_ok(1, "single", 3, 2).await;
    let (status, problem, _) = place(&app, &order("over", 3, &[(1, 1), (2, 1)])).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(
        problem["line"],
        json!({"sku_id": 1, "code": "LIMIT_EXCEEDED"})
    );
    // Another buyer's order of the same lines fits.
    let (status, _, _) = place(&app, &order("fits", 4, &[(1, 1), (2, 1)])).await;
    assert_eq!(status, 201);
    wait_order_row(&app, "fits").await;
    app.wait_ledger_rows(3).await;
    assert_eq!(both_available(&app, 1).await, (Some(2), Some(2)));
    assert_eq!(both_available(&app, 2).await, (Some(0), Some(0)));
    for refused in ["short", "over"] {
        assert_eq!(order_row(&app, refused).await, None, "{refused}");
        let (status, body) = app.get_json(&format!("/v1/orders/{refused}")).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (404, Some("ORDER_NOT_FOUND"))
        );
    }
    // A SKU sold out by the order: the next order naming it is refused on that line.
    let (status, problem, _) = place(&app, &order("late", 5, &[(1, 1), (2, 1)])).await;
    assert_eq!(
        (status, problem["line"]["code"].as_str()),
        (409, Some("SOLD_OUT"))
    );
    finish(app, &[1, 2]).await;
}

/// Malformed orders are 400 and hold nothing; a line on an unknown SKU is
/// 404 naming it; `orders.max_lines` bounds the lines.
#[tokio::test]
async fn malformed_orders_are_refused_before_anything_is_held() {
    let app = TestApp::with(TestOptions {
        tweak: Some(Arc::new(|s| s.orders.max_lines = 2)),
        ..options(900)
    })
    .await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let mut unknown_field = order("u", 1, &[(1, 1)]);
    unknown_field["coupon"] = json!("x");
    let mut unknown_line_field = order("u", 1, &[(1, 1)]);
    unknown_line_field["lines"][0]["price"] = json!(1);
    for (what, body) in [
        ("unknown field", unknown_field),
        ("unknown line field", unknown_line_field),
        ("no lines", order("e", 1, &[])),
        ("duplicate sku", order("d", 1, &[(1, 1), (1, 2)])),
        ("count 0", order("z", 1, &[(1, 0)])),
        ("count 1001", order("b", 1, &[(1, 1001)])),
        ("over max_lines", order("m", 1, &[(1, 1), (2, 1), (3, 1)])),
        ("bad order id", order("bad id", 1, &[(1, 1)])),
        ("user 0", order("u0", 0, &[(1, 1)])),
    ] {
        let (status, problem, _) = place(&app, &body).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (400, Some("INVALID_REQUEST")),
            "{what}"
        );
    }
    let (status, problem, _) = place(&app, &order("ghost", 1, &[(1, 1), (77, 1)])).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (404, Some("SKU_NOT_FOUND"))
    );
    assert_eq!(
        problem["line"],
        json!({"sku_id": 77, "code": "SKU_NOT_FOUND"})
    );
    for sku in [1, 2] {
        assert_eq!(both_available(&app, sku).await, (Some(5), Some(5)));
    }
    assert_eq!(app.ledger_rows().await, 0);
    finish(app, &[1, 2]).await;
}

/// Cancel returns every line's units in both stores and frees the quota;
/// a confirm after it is 409 `RESERVATION_RELEASED`; an extension of a
/// live order moves the order and every line, the next is
/// `EXTENSION_LIMIT`; unknown and malformed ids are 404 and 400.
#[tokio::test]
async fn cancel_and_extend_move_the_whole_order() {
    let app = TestApp::with(options(900)).await;
    app.create_sku(1, 5, 1).await;
    app.create_sku(2, 5, 5).await;
    assert_eq!(
        place(&app, &order("gone", 2, &[(1, 1), (2, 3)])).await.0,
        201
    );
    assert_eq!(
        place(&app, &order("kept", 3, &[(1, 1), (2, 1)])).await.0,
        201
    );
    let (status, body) = app.post_json("/v1/orders/gone/cancel").await;
    assert_eq!((status, body["status"].as_str()), (200, Some("RELEASED")));
    assert_eq!(body["reason"], "CANCELLED");
    assert_eq!(app.post_json("/v1/orders/gone/cancel").await.0, 200);
    let (status, problem) = app.post_json("/v1/orders/gone/confirm").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("RESERVATION_RELEASED"))
    );
    let (status, problem) = app.post_json("/v1/orders/gone/extend").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("RESERVATION_RELEASED"))
    );
    // Buyer 2's quota of SKU 1 (limit 1) is back.
    assert_eq!(place(&app, &order("again", 2, &[(1, 1)])).await.0, 201);

    let (_, before) = app.get_json("/v1/orders/kept").await;
    let (status, extended) = app.post_json("/v1/orders/kept/extend").await;
    assert_eq!(
        (status, extended["status"].as_str()),
        (200, Some("RESERVED")),
        "{extended}"
    );
    assert_ne!(extended["expires_at"], before["expires_at"]);
    let mut db = app.mysql().await;
    let times: Vec<(u64, u32)> = db
        .exec(
            "SELECT expires_at_ms, extensions FROM stock_deduct_idempotent
             WHERE deduct_request_id = 'kept' UNION ALL
             SELECT expires_at_ms, extensions FROM orders WHERE order_id = 'kept'",
            (),
        )
        .await
        .unwrap();
    assert_eq!(times.len(), 3);
    assert!(
        times.iter().all(|t| *t == times[0] && t.1 == 1),
        "{times:?}"
    );
    let expected = stockd::clock::rfc3339_ms(times[0].0);
    assert_eq!(extended["expires_at"].as_str(), Some(expected.as_str()));
    let (_, replay, _) = place(&app, &order("kept", 3, &[(1, 1), (2, 1)])).await;
    assert_eq!(
        replay["expires_at"], extended["expires_at"],
        "the record mirrors it"
    );
    let (status, problem) = app.post_json("/v1/orders/kept/extend").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("EXTENSION_LIMIT"))
    );
    for (path, status, code) in [
        ("/v1/orders/nope/confirm", 404, "ORDER_NOT_FOUND"),
        ("/v1/orders/nope/extend", 404, "ORDER_NOT_FOUND"),
        ("/v1/orders/bad%20id", 400, "INVALID_REQUEST"),
    ] {
        let (got, body) = if path.ends_with("id") {
            app.get_json(path).await
        } else {
            app.post_json(path).await
        };
        assert_eq!((got, body["code"].as_str()), (status, Some(code)), "{path}");
    }
    // A line of an order is not moved on its own.
    let (status, problem) = app.post_json("/v1/skus/1/reservations/kept/cancel").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("ORDER_LINE"))
    );
    app.wait_ledger_rows(5).await;
    finish(app, &[1, 2]).await;
}

/// An unpaid order expires whole at its time; an extended one only at its
/// extended time (the closer's first delivery finds it not yet due).
#[tokio::test]
async fn an_unpaid_order_expires_whole_and_an_extended_one_later() {
    let app = TestApp::with(TestOptions {
        closer: true,
        tweak: Some(Arc::new(|s| {
            s.closer.grace_ms = 0;
            s.reservation.extend_secs = 3;
        })),
        ..options(1)
    })
    .await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    assert_eq!(
        place(&app, &order("late", 1, &[(1, 1), (2, 1)])).await.0,
        201
    );
    assert_eq!(
        place(&app, &order("held", 2, &[(1, 2), (2, 2)])).await.0,
        201
    );
    wait_order_row(&app, "held").await;
    assert_eq!(app.post_json("/v1/orders/held/extend").await.0, 200);
    app.eventually("order late expired", Duration::from_secs(20), || async {
        order_row(&app, "late").await == Some(("RELEASED".into(), Some("EXPIRED".into())))
    })
    .await;
    assert_eq!(
        order_row(&app, "held").await.map(|r| r.0).as_deref(),
        Some("RESERVED"),
        "the extension holds it past its first time"
    );
    assert_eq!(both_available(&app, 1).await, (Some(3), Some(3)));
    app.eventually("order held expired", Duration::from_secs(20), || async {
        order_row(&app, "held").await.map(|r| r.0).as_deref() == Some("RELEASED")
    })
    .await;
    for sku in [1, 2] {
        assert_eq!(
            app.ledger_status(sku, "held").await.as_deref(),
            Some("RELEASED")
        );
        app.eventually("units back in Redis", Duration::from_secs(10), || async {
            both_available(&app, sku).await == (Some(5), Some(5))
        })
        .await;
    }
    finish(app, &[1, 2]).await;
}

/// A sold-out SKU flagged on this node: an order with a line on it is 409
/// from memory (no script call reaches Redis), naming the line.
#[tokio::test]
async fn an_order_on_a_flagged_sold_out_sku_is_refused_without_redis() {
    let private = PrivateRedis::start().await;
    let mut app = TestApp::with(TestOptions {
        redis_url: Some(private.url.clone()),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 1, 5).await;
    let (b_base, b) = app.spawn_api();
    app.wait_subscribers(2).await;
    assert_eq!(
        place(&app, &order("last", 1, &[(1, 1), (2, 1)])).await.0,
        201
    );
    let board = b.soldout.clone().unwrap();
    app.eventually("SKU 2 flagged", Duration::from_secs(5), || async {
        board.is_flagged(TestApp::sku(2))
    })
    .await;
    let (scripts, refused) = (private.script_calls().await, board.short_circuited());
    for i in 0..5 {
        let body = order(&format!("o{i}"), 10 + i, &[(1, 1), (2, 1)]);
        let (status, problem, _) = place_at(&app, &b_base, &body).await;
        assert_eq!(status, 409);
        assert_eq!(problem["line"], json!({"sku_id": 2, "code": "SOLD_OUT"}));
    }
    assert_eq!(board.short_circuited() - refused, 5);
    assert_eq!(private.script_calls().await, scripts, "no script call");
    // The winner's replay is still answered from Redis.
    let winner = order("last", 1, &[(1, 1), (2, 1)]);
    assert_eq!(place_at(&app, &b_base, &winner).await.0, 200);
    assert_eq!(app.redis_available(1).await, Some(4));
    finish(app, &[1, 2]).await;
}

/// N buyers place 2-line orders over SKUs A and B (stock S each), lines in
/// either order: exactly S orders are held, each whole, and both stores
/// agree line by line.
#[tokio::test]
async fn buyers_racing_for_the_last_units_of_two_skus_each_get_all_or_nothing() {
    const STOCK: i64 = 10;
    const BUYERS: u64 = 40;
    let app = Arc::new(TestApp::with(options(900)).await);
    app.create_sku(1, STOCK, 5).await;
    app.create_sku(2, STOCK, 5).await;
    let mut tasks = Vec::new();
    for buyer in 1..=BUYERS {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let lines = if buyer % 2 == 0 {
                [(1, 1), (2, 1)]
            } else {
                [(2, 1), (1, 1)]
            };
            let body = order(&format!("race-{buyer}"), buyer, &lines);
            // A 503 is "retry": held line by line (a cluster), a line short
            // while another order's attempt holds units it may give back
            // (docs/architecture.md, "Orders": a hold is not yet a sale).
            for _ in 0..200 {
                let status = place(&app, &body).await.0;
                if status != 503 {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            503
        }));
    }
    let mut held = 0;
    for task in tasks {
        match task.await.unwrap() {
            201 => held += 1,
            409 => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(held, STOCK, "exactly the stock is sold");
    app.wait_ledger_rows(2 * STOCK as u64).await;
    let app = Arc::into_inner(app).unwrap();
    let mut db = app.mysql().await;
    let per_order: Vec<(String, u64)> = db
        .query(
            "SELECT deduct_request_id, COUNT(*) FROM stock_deduct_idempotent
             WHERE status = 'RESERVED' GROUP BY deduct_request_id",
        )
        .await
        .unwrap();
    assert_eq!(per_order.len() as i64, STOCK);
    assert!(
        per_order.iter().all(|(_, lines)| *lines == 2),
        "{per_order:?}"
    );
    let orders: u64 = db
        .query_first("SELECT COUNT(*) FROM orders WHERE status = 'RESERVED'")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(orders as i64, STOCK);
    drop(db);
    for sku in [1, 2] {
        assert_eq!(both_available(&app, sku).await, (Some(0), Some(0)));
    }
    finish(app, &[1, 2]).await;
}
