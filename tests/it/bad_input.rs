//! Malformed requests are 400 problem+json and write nothing (no key, no row).

use serde_json::Value;

use crate::helpers::TestApp;

/// A reservation body with these raw JSON values.
fn body(rid: &str, user: &str, count: &str) -> String {
    format!(r#"{{"request_id":{rid},"user_id":{user},"count":{count}}}"#)
}

/// (label, path suffix after /v1/skus/, raw body)
fn malformed() -> Vec<(&'static str, String, String)> {
    let ok_path = "1/reservations".to_string();
    vec![
        ("not json", ok_path.clone(), "{nope".into()),
        ("empty body", ok_path.clone(), "".into()),
        ("array", ok_path.clone(), "[1,2]".into()),
        (
            "missing count",
            ok_path.clone(),
            r#"{"request_id":"a","user_id":1}"#.into(),
        ),
        (
            "unknown field",
            ok_path.clone(),
            r#"{"request_id":"a","user_id":1,"count":1,"price":5}"#.into(),
        ),
        (
            "count as string",
            ok_path.clone(),
            body(r#""a""#, "1", r#""1""#),
        ),
        ("count zero", ok_path.clone(), body(r#""a""#, "1", "0")),
        ("count negative", ok_path.clone(), body(r#""a""#, "1", "-1")),
        ("count huge", ok_path.clone(), body(r#""a""#, "1", "1001")),
        (
            "count overflow",
            ok_path.clone(),
            body(r#""a""#, "1", "99999999999999999999999"),
        ),
        ("count float", ok_path.clone(), body(r#""a""#, "1", "1.5")),
        ("user zero", ok_path.clone(), body(r#""a""#, "0", "1")),
        ("user negative", ok_path.clone(), body(r#""a""#, "-5", "1")),
        (
            "user as string",
            ok_path.clone(),
            body(r#""a""#, r#""7""#, "1"),
        ),
        (
            "user too big",
            ok_path.clone(),
            body(r#""a""#, "9223372036854775808", "1"),
        ),
        ("request id empty", ok_path.clone(), body(r#""""#, "1", "1")),
        (
            "request id with braces",
            ok_path.clone(),
            body(r#""{1}""#, "1", "1"),
        ),
        (
            "request id with star",
            ok_path.clone(),
            body(r#""a*""#, "1", "1"),
        ),
        (
            "request id with space",
            ok_path.clone(),
            body(r#""a b""#, "1", "1"),
        ),
        (
            "request id with colon-brace",
            ok_path.clone(),
            body(r#""a:}""#, "1", "1"),
        ),
        (
            "request id 65 chars",
            ok_path.clone(),
            body(&format!("\"{}\"", "x".repeat(65)), "1", "1"),
        ),
        ("request id number", ok_path.clone(), body("12", "1", "1")),
        ("request id null", ok_path.clone(), body("null", "1", "1")),
        (
            "oversize body",
            ok_path.clone(),
            format!(
                r#"{{"request_id":"a","user_id":1,"count":1,"pad":"{}"}}"#,
                "x".repeat(10_000)
            ),
        ),
    ]
    .into_iter()
    .chain(bad_sku_ids())
    .collect()
}

/// A good body on the path of a SKU id that is no id.
fn bad_sku_ids() -> impl Iterator<Item = (&'static str, String, String)> {
    [
        ("sku zero", "0"),
        ("sku negative", "-1"),
        ("sku not a number", "abc"),
        ("sku with brace", "%7B1%7D"),
        ("sku too big", "9223372036854775808"),
    ]
    .into_iter()
    .map(|(label, id)| {
        (
            label,
            format!("{id}/reservations"),
            body(r#""a""#, "1", "1"),
        )
    })
}

/// Every malformed reservation is 400 INVALID_REQUEST problem+json, and Redis and
/// MySQL are exactly as before.
#[tokio::test]
async fn malformed_reservations_are_400_and_write_nothing() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let keys_before = {
        let mut k = app.redis_keys().await;
        k.sort();
        k
    };
    let cases = malformed();
    assert!(cases.len() >= 20);
    for (label, path, raw) in cases {
        let resp = app
            .client
            .post(format!("{}/v1/skus/{path}", app.base))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string());
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(status, 400, "{label}: {body}");
        assert_eq!(ct.as_deref(), Some("application/problem+json"), "{label}");
        assert_eq!(body["code"], "INVALID_REQUEST", "{label}");
        assert_eq!(body["status"], 400, "{label}");
    }
    let mut keys_after = app.redis_keys().await;
    keys_after.sort();
    assert_eq!(keys_before, keys_after, "no Redis key written");
    assert_eq!(app.redis_available(1).await, Some(10));
    assert_eq!(app.ledger_rows().await, 0);
    assert_eq!(app.mysql_available(1).await, Some(10));
    app.cleanup().await;
}

/// Bad admin bodies are 400 and create nothing.
#[tokio::test]
async fn malformed_admin_bodies_are_400() {
    let app = TestApp::spawn().await;
    for raw in [
        r#"{"total_stock":-1,"limit_per_user":1}"#,
        r#"{"total_stock":10,"limit_per_user":0}"#,
        r#"{"total_stock":10}"#,
        r#"{"total_stock":"10","limit_per_user":1}"#,
        r#"{"total_stock":10,"limit_per_user":1,"x":1}"#,
    ] {
        let resp = app
            .client
            .put(format!("{}/v1/admin/skus/5", app.base))
            .bearer_auth(crate::helpers::ADMIN_TOKEN)
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{raw}");
    }
    assert_eq!(app.mysql_available(5).await, None);
    assert_eq!(app.redis_available(5).await, None);
    app.cleanup().await;
}

/// A body must say it is JSON (issue 48): a valid reservation or order body
/// sent without `Content-Type`, or as `text/plain` or a form, is 415
/// UNSUPPORTED_MEDIA_TYPE problem+json and holds nothing; `application/json`
/// and a `+json` type are read.
#[tokio::test]
async fn a_body_that_does_not_say_json_is_415_and_holds_nothing() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let reserve = format!("{}/v1/skus/1/reservations", app.base);
    let order = format!("{}/v1/orders", app.base);
    let order_body = r#"{"order_id":"o-ct","user_id":1,"lines":[{"sku_id":1,"count":1}]}"#;
    for (url, raw) in [
        (&reserve, body(r#""ct-1""#, "1", "1")),
        (&order, order_body.into()),
    ] {
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
        ] {
            let mut req = app.client.post(url).body(raw.clone());
            if let Some(ct) = content_type {
                req = req.header("content-type", ct);
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 415, "{url} {content_type:?}");
            let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
            assert_eq!(ct, "application/problem+json");
            let problem: Value = resp.json().await.unwrap();
            assert_eq!(problem["code"], "UNSUPPORTED_MEDIA_TYPE");
        }
    }
    assert_eq!(app.redis_available(1).await, Some(10));
    let resp = app
        .client
        .post(&reserve)
        .header("content-type", "application/merge-patch+json")
        .body(body(r#""ct-2""#, "1", "1"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "a +json type is JSON");
    app.wait_ledger_rows(1).await;
    app.cleanup().await;
}
