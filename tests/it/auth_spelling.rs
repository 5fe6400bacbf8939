//! No spelling of a path means one thing to the gate and another to the
//! router (issue 48, item 1): actix routes the percent-decoded path, so
//! `/v1/skus/1/reservation%73` used to run the reserve handler for a client
//! with scope `read` only, past a gate that matched the raw text to no route.
//! Every public and admin route is called here with percent-encoded spellings
//! of its literal segments, each with a body that would change stock if it
//! got through, by a client lacking the route's scope.

use reqwest::Method;
use serde_json::{json, Value};
use stockd::config::Scope;
use stockd::roles::api::auth::SCOPED_ROUTES;

use crate::auth::{closed, stores_snapshot, token};
use crate::helpers::{PrivateRedis, TestApp};

/// The admin routes (method, pattern), besides the scoped public ones.
const ADMIN_ROUTES: [(&str, &str); 9] = [
    ("PUT", "/v1/admin/skus/{sku_id}"),
    ("POST", "/v1/admin/skus/{sku_id}/warmup"),
    ("POST", "/v1/admin/skus/{sku_id}/adjustments"),
    ("GET", "/v1/admin/skus/{sku_id}/movements"),
    ("GET", "/v1/admin/dlq"),
    ("POST", "/v1/admin/dlq/replay"),
    ("POST", "/v1/admin/reconcile"),
    ("GET", "/v1/admin/reconcile"),
    ("GET", "/v1/admin/overview"),
];

/// The pattern with ids of this test: SKU 1, the reservation `r1`, the order `o1`.
fn concrete(pattern: &str) -> String {
    pattern
        .replace("{sku_id}", "1")
        .replace("{request_id}", "r1")
        .replace("{order_id}", "o1")
}

/// Spellings of `path` the router decodes to `path` or to a neighbour: one
/// per literal segment with its first letter percent-encoded (lower- and
/// upper-case hex), and each `/` between two segments as `%2F`.
fn encoded_variants(path: &str, pattern: &str) -> Vec<String> {
    let segments: Vec<&str> = path.split('/').collect();
    let literal: Vec<bool> = pattern.split('/').map(|s| !s.contains('{')).collect();
    let mut variants = Vec::new();
    for (i, segment) in segments.iter().enumerate() {
        let Some(first) = segment.bytes().next().filter(|_| literal[i]) else {
            continue;
        };
        for hex in [format!("%{first:02x}"), format!("%{first:02X}")] {
            let mut spelled = segments.clone();
            let encoded = format!("{hex}{}", &segment[1..]);
            spelled[i] = &encoded;
            variants.push(spelled.join("/"));
        }
    }
    for i in 2..segments.len() {
        let joined = format!("{}%2F{}", segments[..i].join("/"), segments[i..].join("/"));
        variants.push(joined);
    }
    variants
}

/// A body that would take, release or move stock if the call ran.
fn harmful_body(pattern: &str) -> Option<Value> {
    match pattern {
        "/v1/skus/{sku_id}/reservations" => {
            Some(json!({"request_id": "bypass", "user_id": 77, "count": 1}))
        }
        "/v1/orders" => Some(json!({"order_id": "bypass-o", "user_id": 77,
            "lines": [{"sku_id": 1, "count": 1}]})),
        "/v1/admin/skus/{sku_id}" => Some(json!({"total_stock": 500, "limit_per_user": 50})),
        "/v1/admin/skus/{sku_id}/adjustments" => {
            Some(json!({"delta": 5, "reason": "bypass", "adjustment_id": "bypass-a"}))
        }
        _ => None,
    }
}

/// A client of [`CLIENTS`] that lacks `scope` (for admin routes: `read`).
fn lacking(scope: Option<Scope>) -> &'static str {
    match scope {
        Some(Scope::Read) => token(Scope::Reserve),
        Some(_) => token(Scope::Read),
        None => token(Scope::Read),
    }
}

/// Every route, spelled with percent-encoded literals by a client lacking its
/// scope: refused with 400/401/403/404 — or 405 where a `%2F` makes the rest
/// one id of a route with other methods (`POST /v1/skus/1%2Freservations` is
/// `/v1/skus/{sku_id}`, which serves GET only) — and nothing ran in Redis (no script
/// call, no key) or was written to the ledger. The correct spellings by the
/// same client are refused too (403/401), and by the right client they run.
#[tokio::test]
async fn encoded_spellings_of_a_route_never_pass_a_client_lacking_its_scope() {
    let redis = PrivateRedis::start().await;
    let mut opts = closed(|_| {});
    opts.redis_url = Some(redis.url.clone());
    let app = TestApp::with(opts).await;
    app.create_sku(1, 100, 10).await;
    let resp = app
        .client
        .post(format!("{}/v1/skus/1/reservations", app.base))
        .bearer_auth(token(Scope::Reserve))
        .json(&json!({"request_id": "r1", "user_id": 1, "count": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    let before = stores_snapshot(&app, &redis).await;
    let scoped = SCOPED_ROUTES
        .iter()
        .map(|(method, pattern, scope)| (*method, *pattern, Some(*scope)));
    let admin = ADMIN_ROUTES
        .iter()
        .map(|(method, pattern)| (*method, *pattern, None));
    let mut tried = 0;
    for (method, pattern, scope) in scoped.chain(admin) {
        let path = concrete(pattern);
        for spelled in encoded_variants(&path, pattern) {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let mut req = app
                .client
                .request(method.clone(), format!("{}{spelled}", app.base))
                .bearer_auth(lacking(scope));
            if let Some(body) = harmful_body(pattern) {
                req = req.json(&body);
            }
            let status = req.send().await.unwrap().status().as_u16();
            assert!(
                matches!(status, 400 | 401 | 403 | 404 | 405),
                "{method} {spelled} answered {status}"
            );
            tried += 1;
        }
    }
    assert!(tried > 100, "only {tried} spellings tried");
    assert_eq!(
        stores_snapshot(&app, &redis).await,
        before,
        "an encoded spelling ran something"
    );
    let read = app
        .client
        .get(format!("{}/v1/skus/1", app.base))
        .bearer_auth(token(Scope::Read))
        .send()
        .await
        .unwrap();
    let body: Value = read.json().await.unwrap();
    assert_eq!(body["available"], 99, "{body}");
    app.cleanup().await;
}

/// With clients not required every caller may reserve, but an encoded
/// spelling is still no route (404 NOT_FOUND): the router never runs it.
#[tokio::test]
async fn an_encoded_spelling_is_no_route_with_auth_off_too() {
    let app = TestApp::spawn().await;
    app.create_sku(1, 10, 5).await;
    let resp = app
        .client
        .post(format!("{}/v1/skus/1/reservation%73", app.base))
        .json(&json!({"request_id": "e1", "user_id": 1, "count": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "NOT_FOUND");
    let (_, sku) = app.get_json("/v1/skus/1").await;
    assert_eq!(sku["available"], 10, "{sku}");
    let text = app.metrics_text().await;
    assert!(
        text.contains(r#"route="unmatched",status="404""#),
        "the metrics call it no route"
    );
    app.cleanup().await;
}

#[test]
fn variants_cover_each_literal_and_each_slash() {
    let pattern = "/v1/skus/{sku_id}/reservations";
    let variants = encoded_variants("/v1/skus/1/reservations", pattern);
    for want in [
        "/%761/skus/1/reservations",
        "/v1/%73kus/1/reservations",
        "/v1/skus/1/%72eservations",
        "/v1%2Fskus/1/reservations",
        "/v1/skus/1%2Freservations",
    ] {
        assert!(
            variants.iter().any(|v| v == want),
            "{want} not in {variants:?}"
        );
    }
    let orders = encoded_variants("/v1/orders/o1", "/v1/orders/{order_id}");
    assert!(orders.iter().any(|v| v == "/v1/%6frders/o1"), "{orders:?}");
    assert!(orders.iter().any(|v| v == "/v1/%6Frders/o1"), "{orders:?}");
    assert!(!orders.iter().any(|v| v.contains("%6fl")), "ids untouched");
}
