//! Holds belong to their client (issue 48, item 2; contract §6.2): with
//! `auth.required` a client neither reads, confirms, cancels nor extends
//! another client's reservation or order (404, as for an unknown id, and
//! nothing changes); an id another client used answers 409 `ID_TAKEN` with
//! nothing of that hold; a client's own replay still replays; a client with
//! scope `admin` acts across clients; the ledger rows and order rows name
//! the client. With `auth.required` false nothing of it is enforced.

use std::sync::Arc;

use reqwest::Method;
use serde_json::{json, Value};
use stockd::config::{ClientSettings, Scope, Settings};
use stockd::roles::api::auth::sha256_hex;

use crate::helpers::http::order_body;
use crate::helpers::{send_for_json, TestApp, TestOptions};

/// Two shops with every public scope, and an operator with `admin` too
/// (tokens of a test, never of a deployment).
const SHOP_A: (&str, &str) = ("shop-a", "tok-shop-a-51e2");
const SHOP_B: (&str, &str) = ("shop-b", "tok-shop-b-8d04");
const OPERATOR: (&str, &str) = ("operator", "tok-operator-2b7a");

fn client((name, token): (&str, &str), admin: bool) -> ClientSettings {
    let mut scopes = vec![Scope::Reserve, Scope::Read, Scope::Lifecycle];
    if admin {
        scopes.push(Scope::Admin);
    }
    ClientSettings {
        name: name.into(),
        token_sha256: Some(sha256_hex(token.as_bytes())),
        cert_subject: None,
        scopes,
    }
}

/// The three clients, with `auth.required` as given.
fn owners(required: bool, consumer: bool) -> TestOptions {
    TestOptions {
        consumer,
        tweak: Some(Arc::new(move |s: &mut Settings| {
            s.auth.required = required;
            s.auth.clients = vec![
                client(SHOP_A, false),
                client(SHOP_B, false),
                client(OPERATOR, true),
            ];
        })),
        ..TestOptions::default()
    }
}

/// `method path` as the client with `token`, with `body` when given.
async fn call(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = app.client.request(method, app.url(path)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    send_for_json(request).await
}

async fn reserve(app: &TestApp, token: &str, rid: &str, user: u64) -> (u16, Value) {
    let body = json!({"request_id": rid, "user_id": user, "count": 1});
    call(
        app,
        Method::POST,
        "/v1/skus/1/reservations",
        token,
        Some(body),
    )
    .await
}

/// `POST /v1/orders` of a two-line order.
async fn place(app: &TestApp, token: &str, id: &str, user: u64) -> (u16, Value) {
    let body = order_body(id, user, &[(1, 1), (2, 1)]);
    call(app, Method::POST, "/v1/orders", token, Some(body)).await
}

async fn get_order(app: &TestApp, token: &str, id: &str) -> (u16, Value) {
    call(app, Method::GET, &format!("/v1/orders/{id}"), token, None).await
}

/// GET, confirm, cancel and extend of one reservation.
async fn act(app: &TestApp, token: &str, verb: &str, rid: &str) -> (u16, Value) {
    let path = format!("/v1/skus/1/reservations/{rid}");
    match verb {
        "get" => call(app, Method::GET, &path, token, None).await,
        verb => call(app, Method::POST, &format!("{path}/{verb}"), token, None).await,
    }
}

/// What must not move when another client is refused: every key of the test
/// with its reservation records, the ledger, both availables.
async fn stores(app: &TestApp, rids: &[&str]) -> String {
    let mut keys = app.redis_keys().await;
    keys.sort();
    let mut conn = app.mysql().await;
    let ledger: Vec<(String, String, u64, u32)> = mysql_async::prelude::Queryable::exec(
        &mut conn,
        "SELECT deduct_request_id, status, expires_at_ms, extensions
         FROM stock_deduct_idempotent ORDER BY sku_id, deduct_request_id",
        (),
    )
    .await
    .unwrap();
    let mut records = Vec::new();
    for rid in rids {
        let record = (app.res.redis.reservations())
            .reservation(
                TestApp::sku(1),
                &stockd::domain::RequestId::parse(rid).unwrap(),
            )
            .await
            .unwrap();
        records.push(format!("{record:?}"));
    }
    let available = (app.redis_available(1).await, app.mysql_available(1).await);
    format!("{keys:?}\n{ledger:?}\n{records:?}\n{available:?}")
}

/// The client each ledger row of SKU 1 names.
async fn ledger_clients(app: &TestApp) -> Vec<(String, Option<String>)> {
    let mut conn = app.mysql().await;
    mysql_async::prelude::Queryable::exec(
        &mut conn,
        "SELECT deduct_request_id, client FROM stock_deduct_idempotent
         WHERE sku_id = 1 ORDER BY deduct_request_id",
        (),
    )
    .await
    .unwrap()
}

/// A 409 `ID_TAKEN` that tells nothing of the hold behind the id.
fn assert_taken(status: u16, body: &Value, what: &str) {
    assert_eq!(status, 409, "{what}: {body}");
    assert_eq!(body["code"], "ID_TAKEN", "{what}");
    let mut members: Vec<&str> = body.as_object().unwrap().keys().map(|k| &**k).collect();
    members.sort_unstable();
    assert_eq!(
        members,
        ["code", "detail", "status", "title", "type"],
        "{what}"
    );
    let text = body.to_string();
    for hint in ["shop-a", "user", "expires", "RESERVED", "CONFIRMED", "line"] {
        assert!(!text.contains(hint), "{what} tells {hint}: {text}");
    }
}

/// Shop B neither reads, confirms, cancels nor extends shop A's
/// reservations (404 as for an unknown id, stores unchanged); A's ids answer
/// B 409 ID_TAKEN whatever the body, writing nothing; A's own replay
/// replays; the operator acts on A's reservations; the ledger rows name
/// their client after the consumer.
#[tokio::test]
async fn a_client_neither_sees_nor_moves_another_clients_reservation_and_its_id_is_taken() {
    let app = TestApp::with(owners(true, true)).await;
    app.create_sku(1, 100, 10).await;
    let (a, b, ops) = (SHOP_A.1, SHOP_B.1, OPERATOR.1);
    for (rid, user) in [("own-1", 1), ("own-2", 1), ("own-3", 2)] {
        assert_eq!(reserve(&app, a, rid, user).await.0, 201, "{rid}");
    }
    app.wait_ledger_rows(3).await;
    app.wait_drained(1).await;
    let rids = ["own-1", "own-2", "own-3"];
    let before = stores(&app, &rids).await;
    for verb in ["get", "confirm", "cancel", "extend"] {
        for rid in rids {
            let (status, body) = act(&app, b, verb, rid).await;
            assert_eq!(status, 404, "B {verb} {rid}: {body}");
            assert_eq!(body["code"], "RESERVATION_NOT_FOUND");
        }
    }
    for (user, what) in [(1, "same body"), (7, "another user")] {
        let (status, body) = reserve(&app, b, "own-1", user).await;
        assert_taken(status, &body, what);
    }
    assert_eq!(
        stores(&app, &rids).await,
        before,
        "B's calls changed nothing"
    );
    assert_eq!(app.outbox_entries().await, 0, "no deduction of B's");

    let (status, body) = reserve(&app, a, "own-1", 1).await;
    assert_eq!(
        (status, &body["request_id"]),
        (200, &json!("own-1")),
        "A's replay"
    );
    assert_eq!(act(&app, a, "get", "own-1").await.0, 200);
    // The operator reads, replays and moves A's reservations.
    assert_eq!(act(&app, ops, "get", "own-1").await.0, 200);
    assert_eq!(
        reserve(&app, ops, "own-1", 1).await.0,
        200,
        "operator replay"
    );
    let (status, body) = act(&app, ops, "confirm", "own-1").await;
    assert_eq!((status, &body["status"]), (200, &json!("CONFIRMED")));
    assert_eq!(act(&app, ops, "cancel", "own-2").await.0, 200);
    // A still moves its own.
    assert_eq!(act(&app, a, "extend", "own-3").await.0, 200);
    assert_eq!(act(&app, a, "confirm", "own-3").await.0, 200);
    // And B's own are B's.
    assert_eq!(reserve(&app, b, "b-1", 3).await.0, 201);
    app.wait_ledger_rows(4).await;
    assert_eq!(act(&app, a, "get", "b-1").await.0, 404);
    let (status, body) = reserve(&app, a, "b-1", 3).await;
    assert_taken(status, &body, "A on B's id");
    let named = |rid: &str, c: &str| (rid.to_string(), Some(c.to_string()));
    assert_eq!(
        ledger_clients(&app).await,
        [
            named("b-1", "shop-b"),
            named("own-1", "shop-a"),
            named("own-2", "shop-a"),
            named("own-3", "shop-a"),
        ]
    );
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// Before the consumer applied it, another client's confirm, cancel and
/// extend find the reservation nowhere from its Redis record: nothing is
/// applied to MySQL for them. The owner's confirm then applies it, naming
/// the client.
#[tokio::test]
async fn another_clients_transition_before_the_consumer_applies_nothing() {
    let mut app = TestApp::with(owners(true, false)).await;
    app.create_sku(1, 100, 10).await;
    assert_eq!(reserve(&app, SHOP_A.1, "early-1", 1).await.0, 201);
    for verb in ["get", "confirm", "cancel", "extend"] {
        let (status, body) = act(&app, SHOP_B.1, verb, "early-1").await;
        assert_eq!(status, 404, "B {verb}: {body}");
    }
    assert_eq!(app.ledger_rows().await, 0, "nothing applied for B");
    let (status, body) = act(&app, SHOP_A.1, "confirm", "early-1").await;
    assert_eq!((status, &body["status"]), (200, &json!("CONFIRMED")));
    assert_eq!(
        ledger_clients(&app).await,
        [("early-1".to_string(), Some("shop-a".to_string()))]
    );
    app.start_consumer();
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// With `auth.required` false every caller is one anonymous client, even
/// with a known token: another token reads, replays and moves the hold, and
/// no row names a client.
#[tokio::test]
async fn without_required_auth_ownership_is_not_enforced() {
    let app = TestApp::with(owners(false, true)).await;
    app.create_sku(1, 100, 10).await;
    let (a, b) = (SHOP_A.1, SHOP_B.1);
    assert_eq!(reserve(&app, a, "open-1", 1).await.0, 201);
    assert_eq!(reserve(&app, a, "open-2", 1).await.0, 201);
    assert_eq!(reserve(&app, b, "open-1", 1).await.0, 200, "a replay");
    assert_eq!(act(&app, b, "get", "open-1").await.0, 200);
    assert_eq!(act(&app, b, "extend", "open-1").await.0, 200);
    assert_eq!(act(&app, b, "confirm", "open-1").await.0, 200);
    assert_eq!(act(&app, b, "cancel", "open-2").await.0, 200);
    app.wait_ledger_rows(2).await;
    assert_eq!(
        ledger_clients(&app).await,
        [("open-1".to_string(), None), ("open-2".to_string(), None)]
    );
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// The same for orders: B neither reads nor moves A's order (404 and
/// nothing changes), A's order id answers B 409 ID_TAKEN, A replays its own,
/// the operator acts across, and the order row and its lines name shop A.
#[tokio::test]
async fn a_client_neither_sees_nor_moves_another_clients_order_and_its_id_is_taken() {
    let app = TestApp::with(owners(true, true)).await;
    app.create_sku(1, 100, 10).await;
    app.create_sku(2, 100, 10).await;
    let (a, b, ops) = (SHOP_A.1, SHOP_B.1, OPERATOR.1);
    for id in ["ord-1", "ord-2", "ord-3"] {
        assert_eq!(place(&app, a, id, 1).await.0, 201, "{id}");
    }
    app.wait_ledger_rows(6).await;
    app.wait_drained(1).await;
    let before = stores(&app, &[]).await;
    for verb in ["get", "confirm", "cancel", "extend"] {
        for id in ["ord-1", "ord-2", "ord-3"] {
            let path = format!("/v1/orders/{id}");
            let (status, body) = match verb {
                "get" => call(&app, Method::GET, &path, b, None).await,
                verb => call(&app, Method::POST, &format!("{path}/{verb}"), b, None).await,
            };
            assert_eq!(status, 404, "B {verb} {id}: {body}");
            assert_eq!(body["code"], "ORDER_NOT_FOUND");
        }
    }
    for user in [1, 9] {
        let (status, body) = place(&app, b, "ord-1", user).await;
        assert_taken(status, &body, "B's order on A's id");
    }
    assert_eq!(stores(&app, &[]).await, before, "B's calls changed nothing");
    assert_eq!(place(&app, a, "ord-1", 1).await.0, 200, "A's replay");
    assert_eq!(get_order(&app, a, "ord-1").await.0, 200);
    assert_eq!(get_order(&app, ops, "ord-1").await.0, 200);
    assert_eq!(place(&app, ops, "ord-1", 1).await.0, 200, "operator replay");
    let confirm = call(&app, Method::POST, "/v1/orders/ord-1/confirm", ops, None).await;
    assert_eq!(confirm.0, 200, "{}", confirm.1);
    let extend = call(&app, Method::POST, "/v1/orders/ord-2/extend", a, None).await;
    assert_eq!(extend.0, 200, "{}", extend.1);
    let cancel = call(&app, Method::POST, "/v1/orders/ord-3/cancel", a, None).await;
    assert_eq!(cancel.0, 200, "{}", cancel.1);
    let mut conn = app.mysql().await;
    let orders: Vec<(String, Option<String>)> = mysql_async::prelude::Queryable::exec(
        &mut conn,
        "SELECT order_id, client FROM orders ORDER BY order_id",
        (),
    )
    .await
    .unwrap();
    let a_name = || Some("shop-a".to_string());
    assert_eq!(
        orders,
        [
            ("ord-1".to_string(), a_name()),
            ("ord-2".to_string(), a_name()),
            ("ord-3".to_string(), a_name()),
        ]
    );
    let lines = ledger_clients(&app).await;
    assert!(lines.iter().all(|(_, c)| *c == a_name()), "{lines:?}");
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// A line of an order held line by line (SKU 1 split, so the intent path
/// runs on a standalone Redis too) records its client like a line of
/// `order.lua`: another client's single reservation of the order id on a
/// line's SKU answers 409 ID_TAKEN telling nothing of the order, holding
/// nothing; the owner's own is still a mismatch (a reservation never
/// replays an order's line).
#[tokio::test]
async fn a_line_held_line_by_line_belongs_to_its_client() {
    let app = TestApp::with(owners(true, true)).await;
    let split = json!({"total_stock": 40, "limit_per_user": 5, "buckets": 2});
    let (status, answer) = app.put_sku_json(1, &split).await;
    assert_eq!(status, 200, "{answer}");
    app.create_sku(2, 100, 10).await;
    let (status, body) = place(&app, SHOP_A.1, "lbl-1", 1).await;
    assert_eq!(status, 201, "{body}");
    app.wait_ledger_rows(2).await;
    let available = app.redis_available(2).await;
    let body = |user: u64| json!({"request_id": "lbl-1", "user_id": user, "count": 1});
    for user in [1, 8] {
        let (status, answer) = call(
            &app,
            Method::POST,
            "/v1/skus/2/reservations",
            SHOP_B.1,
            Some(body(user)),
        )
        .await;
        assert_taken(status, &answer, &format!("B on A's line, user {user}"));
    }
    let (status, answer) = call(
        &app,
        Method::POST,
        "/v1/skus/2/reservations",
        SHOP_A.1,
        Some(body(1)),
    )
    .await;
    assert_eq!(status, 422, "A on its own line: {answer}");
    assert_eq!(app.redis_available(2).await, available, "nothing held");
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// An order whose id is another client's reservation on one of its lines'
/// SKUs answers 409 ID_TAKEN and holds nothing, in one call (SKUs 2 and 3)
/// or line by line (SKU 1 split); the owner's own order on its reservation's
/// id is still a mismatch.
#[tokio::test]
async fn an_order_on_another_clients_reservation_id_is_taken() {
    let app = TestApp::with(owners(true, true)).await;
    let split = json!({"total_stock": 40, "limit_per_user": 5, "buckets": 2});
    let (status, answer) = app.put_sku_json(1, &split).await;
    assert_eq!(status, 200, "{answer}");
    app.create_sku(2, 100, 10).await;
    app.create_sku(3, 100, 10).await;
    for rid in ["sr-1", "sr-2"] {
        let body = json!({"request_id": rid, "user_id": 1, "count": 1});
        let path = "/v1/skus/2/reservations";
        let (status, answer) = call(&app, Method::POST, path, SHOP_A.1, Some(body)).await;
        assert_eq!(status, 201, "{answer}");
    }
    app.wait_ledger_rows(2).await;
    let before = [app.redis_available(2).await, app.redis_available(3).await];
    for (id, lines) in [("sr-1", [(2, 1), (3, 1)]), ("sr-2", [(1, 1), (2, 1)])] {
        let body = order_body(id, 1, &lines);
        let (status, answer) = call(&app, Method::POST, "/v1/orders", SHOP_B.1, Some(body)).await;
        assert_taken(status, &answer, &format!("B's order {id}"));
    }
    let after = [app.redis_available(2).await, app.redis_available(3).await];
    assert_eq!(after, before, "nothing held");
    let body = order_body("sr-1", 1, &[(2, 1), (3, 1)]);
    let (status, answer) = call(&app, Method::POST, "/v1/orders", SHOP_A.1, Some(body)).await;
    assert_eq!(status, 422, "A's order on its own id: {answer}");
    app.wait_drained(1).await;
    app.cleanup().await;
}
