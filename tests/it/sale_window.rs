//! A SKU's sale terms (docs/contract.md §19): the window set,
//! moved and removed by the admin `PUT` (and refused once the sale opened),
//! shown by the SKU views; holds refused before the opening (from memory
//! while the node's clock is beyond `sale.clock_margin_ms`, by Redis's
//! clock within it: two api nodes with skewed clocks), after the close
//! (a replay still answers 200), and without a pass where one is required
//! (from memory, and from the script when a node's board is stale); order
//! lines; a split SKU's buckets all carry the terms. Every refusal writes
//! nothing.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::http::order_body;
use crate::helpers::{send_for_json, PrivateRedis, TestApp, TestOptions};
use stockd::clock::{rfc3339_ms, unix_ms};
use stockd::domain::SaleTerms;

/// The HS256 secret these tests' passes are signed with (contract §20).
const SECRET: &[u8] = b"sale-window-tests-shared-secret-0123456789";

/// Options with one HS256 pass key, `w`.
fn options() -> TestOptions {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let file = std::env::temp_dir().join(format!("stockd-it-sale-{unique}"));
    std::fs::write(&file, SECRET).unwrap();
    TestOptions {
        tweak: Some(Arc::new(move |s| {
            s.passes.keys = vec![stockd::config::PassKeySettings {
                id: "w".into(),
                hs256_secret_file: Some(file.clone()),
                ed25519_public_key_file: None,
                ed25519_private_key_file: None,
            }];
        })),
        ..TestOptions::default()
    }
}

/// A pass `jti` of buyer 7 for `skus`, valid for five minutes.
fn pass(jti: &str, skus: &[u64]) -> String {
    let now_s = now() / 1000;
    let claims = json!({"sub": "7", "jti": jti, "nbf": now_s - 5, "exp": now_s + 300,
                        "stockd_skus": skus});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("w".into());
    let key = jsonwebtoken::EncodingKey::from_secret(SECRET);
    jsonwebtoken::encode(&header, &claims, &key).unwrap()
}

fn now() -> i64 {
    unix_ms() as i64
}

fn at(ms: i64) -> String {
    rfc3339_ms(ms as u64)
}

/// Sleeps until this host's clock reads `ms`.
async fn sleep_until(ms: i64) {
    let wait = (ms - now()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

/// The SKU admin `PUT` of 10 units, 5 per buyer, with `extra` keys.
async fn put(app: &TestApp, sku: u64, extra: Value) -> (u16, Value) {
    let mut body = json!({"total_stock": 10, "limit_per_user": 5});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    app.put_sku_json(sku, &body).await
}

/// A reservation of one unit at `base`, with or without a `pass`: status,
/// body and `Retry-After`.
async fn reserve(
    app: &TestApp,
    base: &str,
    sku: u64,
    rid: &str,
    pass: Option<&str>,
) -> (u16, Value, Option<String>) {
    let mut body = json!({"request_id": rid, "user_id": 7, "count": 1});
    if let Some(pass) = pass {
        body["pass"] = json!(pass);
    }
    let url = format!("{base}/v1/skus/{sku}/reservations");
    let resp = app.client.post(url).json(&body).send().await.unwrap();
    let status = resp.status().as_u16();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (status, resp.json().await.unwrap_or(Value::Null), retry)
}

/// Nothing of the refused request `rid` was written: no record in Redis,
/// no ledger row, the stock where it was.
async fn nothing_written(app: &TestApp, sku: u64, rid: &str, available: i64) {
    let sku_id = TestApp::sku(sku);
    let rid = stockd::domain::RequestId::parse(rid).unwrap();
    let record = app.res.redis.reservations().record(sku_id, &rid).await;
    assert!(record.unwrap().is_none(), "a record of {rid}");
    assert_eq!(app.redis_available(sku).await, Some(available));
    assert_eq!(app.ledger_status(sku, rid.as_str()).await, None);
}

/// Waits until the board of the node at `state` knows `terms` for `sku`.
async fn board_knows(state: &stockd::roles::api::ApiState, sku: u64, terms: SaleTerms) {
    let known = crate::helpers::poll_until(Duration::from_secs(10), || async {
        state.sale.terms(TestApp::sku(sku)) == terms
    })
    .await;
    assert!(known, "the board never learned SKU {sku}'s terms");
}

/// Before the window: 409 SALE_NOT_STARTED with `opens_at` and
/// `Retry-After`, from memory (no script call) beyond the margin and from
/// Redis within it; at the opening it sells; from the close on SALE_ENDED,
/// while a replay of a hold made in the window still answers 200.
#[tokio::test]
async fn a_sale_sells_only_inside_its_window_by_redis_clock() {
    let redis = PrivateRedis::start().await;
    let mut opts = options();
    opts.redis_url = Some(redis.url.clone());
    let app = TestApp::with(opts).await;
    let opens = now() + 3_000;
    let closes = opens + 1_500;
    let window = json!({"sale": {"opens_at": at(opens), "closes_at": at(closes)}});
    let (status, view) = put(&app, 1, window).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["sale"]["opens_at"], at(opens));
    assert_eq!(view["sale"]["closes_at"], at(closes));
    assert_eq!(view["requires_pass"], false);

    // Beyond the margin: from memory.
    let calls = redis.script_calls().await;
    let (status, problem, retry) = reserve(&app, &app.base, 1, "early", None).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(problem["code"], "SALE_NOT_STARTED");
    assert_eq!(problem["opens_at"], at(opens));
    let retry: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((2..=3).contains(&retry), "Retry-After {retry}");
    assert_eq!(redis.script_calls().await, calls, "a script ran");
    nothing_written(&app, 1, "early", 10).await;

    // Within the margin: Redis's clock decides, and says not yet.
    sleep_until(opens - 600).await;
    let (status, problem, retry) = reserve(&app, &app.base, 1, "near", None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("SALE_NOT_STARTED"))
    );
    assert_eq!(problem["opens_at"], at(opens));
    assert_eq!(retry.as_deref(), Some("1"));
    assert!(redis.script_calls().await > calls, "Redis was not asked");
    nothing_written(&app, 1, "near", 10).await;

    sleep_until(opens + 50).await;
    let (status, body, _) = reserve(&app, &app.base, 1, "in", None).await;
    assert_eq!(status, 201, "{body}");

    sleep_until(closes + 50).await;
    let (status, problem, _) = reserve(&app, &app.base, 1, "late", None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("SALE_ENDED"))
    );
    nothing_written(&app, 1, "late", 9).await;
    let (status, body, _) = reserve(&app, &app.base, 1, "in", None).await;
    assert_eq!(status, 200, "the replay after the close: {body}");
    assert_eq!(body["request_id"], "in");
    app.finish_drained_and_conserved(1).await;
}

/// Within the margin the node's memory never refuses; Redis's clock alone
/// tells the opening (the scripts refuse by it even when a node lets the
/// request through).
#[tokio::test]
async fn the_script_refuses_before_the_opening_by_redis_time() {
    let app = TestApp::with(options()).await;
    let opens = now() + 60_000;
    let (status, _) = put(&app, 1, json!({"sale": {"opens_at": at(opens)}})).await;
    assert_eq!(status, 200);
    let outcome = app
        .res
        .redis
        .reservations()
        .reserve(
            TestApp::sku(1),
            &stockd::domain::RequestId::parse("direct").unwrap(),
            stockd::domain::UserId::new(1).unwrap(),
            1,
            &stockd::domain::Requester::Anyone,
        )
        .await
        .unwrap();
    assert_eq!(
        outcome,
        stockd::domain::ReserveOutcome::Gated(stockd::domain::GateRefusal::NotStarted {
            opens_at_ms: opens
        })
    );
    nothing_written(&app, 1, "direct", 10).await;
    app.finish_drained_and_conserved(1).await;
}

/// Two api nodes, one whose clock runs 5 s ahead: while that node thinks
/// the sale has opened and Redis's clock says not yet, it sells nothing
/// (Redis answers SALE_NOT_STARTED); the other node refuses from memory.
/// Once Redis's clock passes the opening both sell.
#[tokio::test]
async fn a_node_whose_clock_runs_ahead_cannot_open_the_sale_early() {
    let mut app = TestApp::with(options()).await;
    let opens = now() + 3_000;
    let (status, _) = put(&app, 1, json!({"sale": {"opens_at": at(opens)}})).await;
    assert_eq!(status, 200);
    let (ahead, ahead_state) = app.spawn_api_with(|s| s.sale.clock_offset_ms = 5_000);
    let terms = SaleTerms {
        opens_at_ms: Some(opens),
        ..SaleTerms::default()
    };
    board_knows(&ahead_state, 1, terms).await;
    // The node ahead believes the sale open: Redis says not yet.
    let (status, problem, _) = reserve(&app, &ahead, 1, "ahead-1", None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("SALE_NOT_STARTED")),
        "{problem}"
    );
    assert_eq!(problem["opens_at"], at(opens));
    let (status, problem, _) = reserve(&app, &app.base, 1, "on-time-1", None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("SALE_NOT_STARTED"))
    );
    nothing_written(&app, 1, "ahead-1", 10).await;
    sleep_until(opens + 50).await;
    let (status, body, _) = reserve(&app, &ahead, 1, "ahead-2", None).await;
    assert_eq!(status, 201, "{body}");
    let (status, body, _) = reserve(&app, &app.base, 1, "on-time-2", None).await;
    assert_eq!(status, 201, "{body}");
    app.finish_drained_and_conserved(1).await;
}

/// A change of terms reaches another node's board by its notice, well
/// before the boards' periodic re-read: that node then refuses from memory.
#[tokio::test]
async fn a_change_of_terms_reaches_every_nodes_board() {
    let mut app = TestApp::with(options()).await;
    app.create_sku(1, 10, 5).await;
    let wanted = SaleTerms {
        requires_pass: true,
        ..SaleTerms::default()
    };
    // The other node has read every SKU's terms, which it does once
    // subscribed: SKU 2's tell that it listens.
    let (status, _) = put(&app, 2, json!({"requires_pass": true})).await;
    assert_eq!(status, 200);
    let (other, other_state) = app.spawn_api();
    board_knows(&other_state, 2, wanted).await;
    let (status, _) = put(&app, 1, json!({"requires_pass": true})).await;
    assert_eq!(status, 200);
    let told = crate::helpers::poll_until(Duration::from_secs(3), || async {
        other_state.sale.terms(TestApp::sku(1)) == wanted
    })
    .await;
    assert!(told, "the other node's board was not told");
    assert!(stockd::sale::subscriber::REREAD_EVERY > Duration::from_secs(3));
    let (status, problem, _) = reserve(&app, &other, 1, "other", None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("PASS_REQUIRED"))
    );
    nothing_written(&app, 1, "other", 10).await;
    app.finish_drained_and_conserved(1).await;
}

/// The window moves and goes away before it opens; once open, its
/// `opens_at` cannot move nor the window go (409 SALE_OPEN) but `closes_at`
/// may; bad times are 400. Nothing is written by a refusal.
#[tokio::test]
async fn a_window_moves_before_it_opens_and_only_its_close_after() {
    let app = TestApp::with(options()).await;
    let far = now() + 3_600_000;
    let (status, _) = put(&app, 1, json!({"sale": {"opens_at": at(far)}})).await;
    assert_eq!(status, 200);
    let (status, view) = put(&app, 1, json!({"sale": {"opens_at": at(far + 60_000)}})).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["sale"]["opens_at"], at(far + 60_000));
    assert_eq!(view["sale"]["closes_at"], Value::Null);
    // An absent key keeps the window.
    let (status, view) = put(&app, 1, json!({})).await;
    assert_eq!(
        (status, &view["sale"]["opens_at"]),
        (200, &json!(at(far + 60_000)))
    );
    let (status, view) = put(&app, 1, json!({"sale": null})).await;
    assert_eq!((status, &view["sale"]), (200, &Value::Null));
    let (status, _, _) = reserve(&app, &app.base, 1, "open-to-all", None).await;
    assert_eq!(status, 201);

    // Bad input: 400, nothing written.
    for bad in [
        json!({"sale": {"opens_at": "tomorrow"}}),
        json!({"sale": {"opens_at": at(far), "closes_at": at(far)}}),
        json!({"sale": {"opens_at": at(far), "closes_at": "2026-13-01T00:00:00Z"}}),
        json!({"sale": {"closes_at": at(far)}}),
        json!({"requires_pass": "yes"}),
    ] {
        let mut body = json!({"total_stock": 10, "limit_per_user": 5});
        for (k, v) in bad.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (status, code) = app.put_sku_problem(1, &body).await;
        assert_eq!((status, code.as_str()), (400, "INVALID_REQUEST"), "{bad}");
    }
    let (_, view) = app.get_json("/v1/skus/1").await;
    assert_eq!(
        (&view["sale"], &view["requires_pass"]),
        (&Value::Null, &json!(false))
    );

    // Open now: the opening stays, the close moves.
    let opened = now() - 1_000;
    let (status, _) = put(&app, 1, json!({"sale": {"opens_at": at(opened)}})).await;
    assert_eq!(status, 200);
    for refused in [
        json!({"sale": {"opens_at": at(opened + 10_000)}}),
        json!({"sale": null}),
    ] {
        let mut body = json!({"total_stock": 10, "limit_per_user": 5});
        body["sale"] = refused["sale"].clone();
        let (status, code) = app.put_sku_problem(1, &body).await;
        assert_eq!((status, code.as_str()), (409, "SALE_OPEN"), "{refused}");
    }
    let (_, view) = app.get_json("/v1/skus/1").await;
    assert_eq!(view["sale"]["opens_at"], at(opened));
    let closes = now() + 3_600_000;
    let moved = json!({"sale": {"opens_at": at(opened), "closes_at": at(closes)}});
    let (status, view) = put(&app, 1, moved).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["sale"]["closes_at"], at(closes));
    let (_, view) = app.get_json("/v1/skus/1").await;
    assert_eq!(view["sale"]["closes_at"], at(closes));
    app.finish_drained_and_conserved(1).await;
}

/// `requires_pass`: without a `pass` 403 PASS_REQUIRED from memory; with a
/// pass that does not verify, 403 PASS_INVALID from memory; with a
/// verified one it sells. A node whose board is stale (the flag set in
/// Redis alone) still sells nothing without a pass: the script refuses.
#[tokio::test]
async fn a_sku_that_requires_a_pass_admits_only_holds_that_carry_one() {
    let redis = PrivateRedis::start().await;
    let mut opts = options();
    opts.redis_url = Some(redis.url.clone());
    let app = TestApp::with(opts).await;
    let (status, view) = put(&app, 1, json!({"requires_pass": true})).await;
    assert_eq!((status, &view["requires_pass"]), (200, &json!(true)));
    let (_, view) = app.get_json("/v1/skus/1").await;
    assert_eq!(view["requires_pass"], true);

    let calls = redis.script_calls().await;
    let (status, problem, _) = reserve(&app, &app.base, 1, "no-pass", None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("PASS_REQUIRED"))
    );
    assert_eq!(redis.script_calls().await, calls, "a script ran");
    nothing_written(&app, 1, "no-pass", 10).await;

    let (status, problem, _) = reserve(&app, &app.base, 1, "bad-pass", Some("forged")).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("PASS_INVALID"))
    );
    assert_eq!(redis.script_calls().await, calls, "a script ran");
    nothing_written(&app, 1, "bad-pass", 10).await;

    let good = pass("p-passed", &[1]);
    let (status, body, _) = reserve(&app, &app.base, 1, "passed", Some(&good)).await;
    assert_eq!(status, 201, "{body}");

    // A stale board: the flag reaches Redis only.
    app.create_sku(2, 10, 5).await;
    let key = app.res.redis.keys().sku(TestApp::sku(2));
    app.redis_cmd(&["HSET", &key, "rp", "1"]).await;
    assert!(!app.api_state().sale.terms(TestApp::sku(2)).requires_pass);
    let (status, problem, _) = reserve(&app, &app.base, 2, "stale", None).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("PASS_REQUIRED"))
    );
    nothing_written(&app, 2, "stale", 10).await;
    app.redis_cmd(&["HDEL", &key, "rp"]).await;
    app.finish_drained_and_conserved(1).await;
}

/// Order lines: a line on a SKU whose sale has not started refuses the
/// whole order (409 SALE_NOT_STARTED naming the line, with `opens_at`);
/// a line of a SKU that requires a pass needs one (403 PASS_REQUIRED from
/// memory without a pass, PASS_INVALID with one that does not verify); a
/// verified pass holds it; after the close SALE_ENDED, and the order held
/// before still replays.
#[tokio::test]
async fn order_lines_follow_their_skus_terms() {
    let app = TestApp::with(options()).await;
    app.create_sku(1, 10, 5).await;
    let opens = now() + 60_000;
    let (status, _) = put(&app, 2, json!({"sale": {"opens_at": at(opens)}})).await;
    assert_eq!(status, 200);
    let (status, problem) = app
        .place_order(&order_body("o-early", 7, &[(1, 1), (2, 1)]))
        .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("SALE_NOT_STARTED")),
        "{problem}"
    );
    assert_eq!(problem["line"]["sku_id"], 2);
    assert_eq!(problem["opens_at"], at(opens));
    assert_eq!(app.redis_available(1).await, Some(10));

    let closes = now() + 2_000;
    let terms = json!({"requires_pass": true,
                       "sale": {"opens_at": at(now() - 1_000), "closes_at": at(closes)}});
    let (status, view) = put(&app, 3, terms).await;
    assert_eq!(status, 200, "{view}");
    let lines = [(1, 1), (3, 1)];
    let (status, problem) = app.place_order(&order_body("o-none", 7, &lines)).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("PASS_REQUIRED")),
        "{problem}"
    );
    assert_eq!(problem["line"]["sku_id"], 3);
    let mut forged = order_body("o-forged", 7, &lines);
    forged["pass"] = json!("forged");
    let (status, problem) = app.place_order(&forged).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (403, Some("PASS_INVALID")),
        "{problem}"
    );
    assert_eq!(app.redis_available(1).await, Some(10));
    assert_eq!(app.redis_available(3).await, Some(10));

    let mut passed = order_body("o-passed", 7, &lines);
    passed["pass"] = json!(pass("p-order", &[3]));
    let (status, body) = app.place_order(&passed).await;
    assert_eq!(status, 201, "{body}");
    sleep_until(closes + 50).await;
    let mut late = order_body("o-late", 7, &lines);
    late["pass"] = json!(pass("p-late", &[3]));
    let (status, problem) = app.place_order(&late).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("SALE_ENDED")),
        "{problem}"
    );
    let (status, body) = app.place_order(&passed).await;
    assert_eq!(status, 200, "the replay after the close: {body}");
    assert_eq!(app.redis_available(1).await, Some(9));
    assert_eq!(app.redis_available(3).await, Some(9));
    app.wait_drained(1).await;
    app.finish_conserved(3).await;
}

/// A creation whose Redis step was left to the sweep (the `PUT` committed
/// and its Redis write failed): the sweep mirrors the terms from MySQL
/// before it loads the stock, so the SKU does not sell before its window.
#[tokio::test]
async fn the_sweep_loads_a_created_sku_with_its_terms() {
    let app = TestApp::with(options()).await;
    let opens = now() + 3_600_000;
    let (status, _) = put(&app, 1, json!({"sale": {"opens_at": at(opens)}})).await;
    assert_eq!(status, 200);
    // As if the PUT had committed and never reached Redis.
    let keys = app.redis_keys().await;
    app.redis_del(&keys).await;
    app.sql("UPDATE stock_movements SET redis_pending = 1 WHERE sku_id = 1 AND kind = 'create'")
        .await;
    let swept = stockd::ops::stock_step::sweep(&app.res.db, &app.res.redis, &[TestApp::sku(1)], 0)
        .await
        .unwrap();
    assert_eq!(swept.restocks_applied, 1);
    assert_eq!(app.redis_available(1).await, Some(10));
    let terms = app
        .res
        .redis
        .skus()
        .sale_terms(TestApp::sku(1))
        .await
        .unwrap();
    assert_eq!(terms.opens_at_ms, Some(opens));
    let outcome = app
        .res
        .redis
        .reservations()
        .reserve(
            TestApp::sku(1),
            &stockd::domain::RequestId::parse("swept").unwrap(),
            stockd::domain::UserId::new(1).unwrap(),
            1,
            &stockd::domain::Requester::Anyone,
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, stockd::domain::ReserveOutcome::Gated(_)),
        "{outcome:?}"
    );
    app.finish_drained_and_conserved(1).await;
}

/// The console's overview shows each SKU's window and whether a pass is
/// required.
#[tokio::test]
async fn the_console_shows_the_window_and_the_pass() {
    let app = TestApp::with(options()).await;
    app.create_sku(1, 10, 5).await;
    let opens = now() + 3_600_000;
    let terms = json!({"requires_pass": true, "sale": {"opens_at": at(opens)}});
    let (status, _) = put(&app, 2, terms).await;
    assert_eq!(status, 200);
    let resp = app.get_admin("/v1/admin/overview").await;
    assert_eq!(resp.status(), 200);
    let overview: Value = resp.json().await.unwrap();
    let skus = overview["skus"].as_array().unwrap();
    let line = |id: u64| skus.iter().find(|s| s["sku_id"] == id).unwrap().clone();
    let plain = line(1);
    assert_eq!(
        (&plain["sale_opens_at"], &plain["requires_pass"]),
        (&Value::Null, &json!(false))
    );
    let gated = line(2);
    assert_eq!(gated["sale_opens_at"], at(opens));
    assert_eq!(gated["sale_closes_at"], Value::Null);
    assert_eq!(gated["requires_pass"], true);
    app.cleanup().await;
}

/// A split SKU: every bucket hash carries the window and the flag (the
/// script of each bucket judges them), and a warm-up keeps them.
#[tokio::test]
async fn every_bucket_of_a_split_sku_carries_the_terms() {
    let app = TestApp::with(options()).await;
    let opens = now() - 1_000;
    let closes = now() + 3_600_000;
    let terms = json!({"buckets": 3, "requires_pass": true,
                       "sale": {"opens_at": at(opens), "closes_at": at(closes)}});
    let (status, view) = put(&app, 1, terms).await;
    assert_eq!(status, 200, "{view}");
    let check = |label: &'static str| {
        let app = &app;
        async move {
            let layout = app
                .res
                .redis
                .buckets()
                .read_layout(TestApp::sku(1))
                .await
                .unwrap();
            assert_eq!(layout.n(), 3);
            let mut conn = app.redis_conn().await;
            for bucket in layout.buckets() {
                let key = app.res.redis.keys().sku_at(layout.tag(bucket));
                let (so, sc, rp): (Option<i64>, Option<i64>, Option<String>) =
                    deadpool_redis::redis::cmd("HMGET")
                        .arg(&key)
                        .arg("so")
                        .arg("sc")
                        .arg("rp")
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                assert_eq!(
                    (so, sc, rp.as_deref()),
                    (Some(opens), Some(closes), Some("1")),
                    "{label}: bucket {bucket}"
                );
            }
        }
    };
    check("after the PUT").await;
    // Every buyer is refused a pass that does not verify, whatever its
    // bucket (from memory: the script's check of each bucket's `rp` is the
    // stale-board case of `a_sku_that_requires_a_pass_admits_only_holds_that_carry_one`).
    for user in 1..=6u64 {
        let rid = format!("u{user}");
        let body = json!({"request_id": rid, "user_id": user, "count": 1, "pass": "forged"});
        let url = app.url("/v1/skus/1/reservations");
        let (status, problem) = send_for_json(app.client.post(url).json(&body)).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (403, Some("PASS_INVALID")),
            "{rid}"
        );
    }
    let resp = app.post_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    check("after a warm-up").await;
    app.finish_drained_and_conserved(1).await;
}
