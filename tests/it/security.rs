//! Abuse and access (issue: rate limits, a private admin surface, production
//! config, canonical ids). Limits are switched on per test; the shared config
//! keeps them off.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::helpers::http::order_body;
use crate::helpers::{PrivateRedis, TestApp, TestOptions, ADMIN_TOKEN};

/// Attempts a token bucket of `per_second` and `burst` may let through in
/// `elapsed` (plus one for a refill landing during the last request).
fn bucket_allows(per_second: f64, burst: u32, elapsed: Duration) -> usize {
    (f64::from(burst) + per_second * elapsed.as_secs_f64()).floor() as usize + 1
}

fn limits(user: (f64, u32), ip: (f64, u32)) -> TestOptions {
    TestOptions {
        tweak: Some(Arc::new(move |s| {
            s.limits.per_user_rps = user.0;
            s.limits.per_user_burst = user.1;
            s.limits.per_ip_rps = ip.0;
            s.limits.per_ip_burst = ip.1;
        })),
        ..TestOptions::default()
    }
}

/// One buyer at 10x their limit: 429 RATE_LIMITED with Retry-After, and only a
/// bucket's worth of attempts is admitted, across two api nodes together.
/// Limited requests write nothing.
#[tokio::test]
async fn a_buyer_hammering_two_api_nodes_gets_429_beyond_the_bucket_and_writes_nothing() {
    let mut app = TestApp::with(limits((1.0, 3), (0.0, 0))).await;
    app.create_sku(1, 1000, 1000).await;
    let (second, _) = app.spawn_api();
    let started = Instant::now();
    let mut admitted = Vec::new();
    let mut limited = Vec::new();
    for i in 0..30 {
        let base = if i % 2 == 0 {
            app.base.clone()
        } else {
            second.clone()
        };
        let rid = format!("h{i}");
        let (status, body) = app.reserve_at(&base, 1, &rid, 7).await;
        match status {
            201 => admitted.push(rid),
            429 => {
                assert_eq!(body["code"], "RATE_LIMITED");
                limited.push(rid);
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    let allowed = bucket_allows(1.0, 3, started.elapsed());
    assert!(
        admitted.len() <= allowed,
        "{} admitted, bucket allows {allowed}",
        admitted.len()
    );
    assert!(limited.len() >= 30 - allowed, "the rest were limited");
    // Retry-After on a 429.
    let response = app.reserve(1, "h-extra", 7, 1).await;
    if response.status() == 429 {
        assert!(response.headers().contains_key("retry-after"));
    }
    app.wait_ledger_rows(admitted.len() as u64).await;
    for rid in &limited {
        assert_eq!(
            app.ledger_status(1, rid).await,
            None,
            "{rid} wrote a ledger row"
        );
        let (status, _) = app
            .get_json(&format!("/v1/skus/1/reservations/{rid}"))
            .await;
        assert_eq!(status, 404, "{rid} left a reservation behind");
    }
    // Another buyer is not affected.
    app.reserve_ok(1, "other", 8, 1).await;
    // A replay of an admitted id is never limited into a wrong answer.
    let replay = app.reserve(1, &admitted[0], 7, 1).await;
    assert_eq!(
        replay.status(),
        200,
        "a replay is answered before the limit"
    );
    app.cleanup().await;
}

/// An order's lines are attempts of its buyer on their SKUs, as
/// reservations are: a buyer's reservations and orders on one SKU share one
/// bucket, and beyond it an order is 429 RATE_LIMITED with nothing held or
/// written. Another buyer is not affected; a replay of a held order is
/// answered before the limit. (On a Redis Cluster the lines are held line by
/// line, `order_hold.lua`, so `make test-cluster` covers that path.)
#[tokio::test]
async fn a_buyers_orders_share_the_rate_limit_with_reservations() {
    let app = TestApp::with(limits((1.0, 3), (0.0, 0))).await;
    app.create_sku(1, 1000, 1000).await;
    app.create_sku(2, 1000, 1000).await;
    let started = Instant::now();
    app.reserve_ok(1, "r1", 7, 1).await;
    app.reserve_ok(1, "r2", 7, 1).await;
    let mut held = Vec::new();
    let mut limited = Vec::new();
    for i in 0..10 {
        let id = format!("o{i}");
        let (status, body) = app
            .place_order(&order_body(&id, 7, &[(1, 1), (2, 1)]))
            .await;
        match status {
            201 | 202 => held.push(id),
            429 => {
                assert_eq!(body["code"], "RATE_LIMITED", "{body}");
                limited.push(id);
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    let allowed = bucket_allows(1.0, 3, started.elapsed());
    assert!(
        2 + held.len() <= allowed,
        "2 reservations and {} orders held on SKU 1, the bucket allows {allowed}",
        held.len()
    );
    assert!(!limited.is_empty(), "orders beyond the bucket are limited");
    // Another buyer is not affected; a replay is answered 200.
    let (status, body) = app
        .place_order(&order_body("other", 8, &[(1, 1), (2, 1)]))
        .await;
    assert!(status == 201 || status == 202, "{status}: {body}");
    let replay = order_body(&held[0], 7, &[(1, 1), (2, 1)]);
    assert_eq!(
        app.place_order(&replay).await.0,
        200,
        "a replay is never limited"
    );
    app.wait_ledger_rows(2 + 2 * (held.len() as u64 + 1)).await;
    for id in &limited {
        for sku in [1, 2] {
            assert_eq!(app.ledger_status(sku, id).await, None, "{id} wrote a line");
        }
        let (status, _) = app.get_json(&format!("/v1/orders/{id}")).await;
        assert_eq!(status, 404, "{id} left an order behind");
    }
    app.cleanup().await;
}

/// One client IP at 10x its limit gets 429s, and those never reach Redis
/// (counted on a private redis-server).
#[tokio::test]
async fn an_ip_over_its_limit_gets_429_before_any_redis_call() {
    let redis = PrivateRedis::start().await;
    let mut opts = limits((0.0, 0), (2.0, 5));
    let tweak = opts.tweak.take().unwrap();
    opts.redis_url = Some(redis.url.clone());
    opts.tweak = Some(tweak);
    let app = TestApp::with(opts).await;
    app.create_sku(1, 1000, 1000).await;
    let before = redis.script_calls().await;
    let started = Instant::now();
    let mut passed = 0;
    for i in 0..50 {
        let status = app.reserve(1, &format!("ip{i}"), 100 + i, 1).await.status();
        match status.as_u16() {
            201 => passed += 1,
            429 => {}
            other => panic!("unexpected {other}"),
        }
    }
    let allowed = bucket_allows(2.0, 5, started.elapsed());
    assert!(
        passed <= allowed,
        "{passed} passed, bucket allows {allowed}"
    );
    let scripts = redis.script_calls().await - before;
    assert_eq!(
        scripts, passed as u64,
        "only admitted requests ran the script"
    );
    // Admin routes are not IP-limited.
    let (status, _) = app.post_json_admin("/v1/admin/reconcile").await;
    assert_eq!(status, 200);
    app.cleanup().await;
}

/// `admin.bind` set: the admin routes and /metrics move to their own listener;
/// the public one answers 404 for them.
#[tokio::test]
async fn with_admin_bind_the_public_listener_hides_the_admin_routes() {
    let app = TestApp::with(TestOptions {
        tweak: Some(Arc::new(|s| s.admin.bind = Some("127.0.0.1:0".into()))),
        ..TestOptions::default()
    })
    .await;
    let admin = app.admin_base().expect("an admin listener");
    let put = |base: String| {
        let client = app.client.clone();
        async move {
            client
                .put(format!("{base}/v1/admin/skus/1"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&serde_json::json!({"total_stock": 10, "limit_per_user": 2}))
                .send()
                .await
                .unwrap()
        }
    };
    let public = put(app.base.clone()).await;
    assert_eq!(public.status(), 404);
    let body: serde_json::Value = public.json().await.unwrap();
    assert_eq!(body["code"], "NOT_FOUND");
    assert_eq!(put(admin.clone()).await.status(), 200);
    assert_eq!(app.get("/metrics").await.status(), 404);
    let metrics_admin = app.get_url(&format!("{admin}/metrics")).await;
    assert_eq!(metrics_admin.status(), 200);
    // The buyer-facing routes stay public.
    app.reserve_ok(1, "r1", 1, 1).await;
    // The deduction must reach MySQL before cleanup checks the queue drained.
    app.finish_drained(1).await;
}

/// The admin token is compared as SHA-256 digests (equal lengths, constant
/// time, whatever is presented): only the exact token gets in — not a prefix,
/// a longer token, one of the same length, or nothing.
#[tokio::test]
async fn only_the_exact_admin_token_is_admitted() {
    let app = TestApp::spawn().await;
    let status = |token: String| {
        let request = app
            .client
            .get(format!("{}/v1/admin/dlq", app.base))
            .bearer_auth(token);
        async move { request.send().await.unwrap().status() }
    };
    let mut neighbour = ADMIN_TOKEN.to_string();
    neighbour.pop();
    neighbour.push('X');
    for wrong in [
        String::new(),
        ADMIN_TOKEN[..ADMIN_TOKEN.len() - 1].to_string(),
        format!("{ADMIN_TOKEN}x"),
        neighbour,
    ] {
        assert_eq!(status(wrong.clone()).await, 401, "{wrong:?} got in");
    }
    assert_ne!(status(ADMIN_TOKEN.to_string()).await, 401);
    app.cleanup().await;
}

/// Ids are canonical decimals: `0980001` and `+1` are 400, never SKU 980001 / 1.
#[tokio::test]
async fn non_canonical_ids_are_400() {
    let app = TestApp::spawn_with_sku(1, 10, 1).await;
    for path in ["/v1/skus/01", "/v1/skus/0980001", "/v1/skus/+1"] {
        let (status, body) = app.get_json(path).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["code"], "INVALID_REQUEST");
    }
    let (status, _) = app.get_json("/v1/skus/1").await;
    assert_eq!(status, 200);
    app.cleanup().await;
}

/// `STOCKD_ENV=production` refuses a short or example admin token, naming the
/// key and never printing the token.
#[tokio::test]
async fn production_refuses_a_weak_admin_token_naming_the_key() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config");
    for weak in ["short-token", "dev-admin-token"] {
        let vars = [("STOCKD__ADMIN__TOKEN".to_string(), weak.to_string())];
        let err = stockd::config::Settings::load_with_vars(&dir, "production", &vars)
            .unwrap_err()
            .to_string();
        assert!(err.contains("admin.token"), "{err}");
        assert!(!err.contains(weak), "the token is never printed: {err}");
    }
    let strong = "0123456789abcdef0123456789abcdef".to_string();
    // Production also needs a client (tests/it/auth.rs).
    let client = format!(
        "[{{name: a, token_sha256: \"{}\", scopes: [read]}}]",
        "0".repeat(64)
    );
    // And the stores' own users: base.yaml's root and guest are refused.
    let vars = [
        ("STOCKD__ADMIN__TOKEN".to_string(), strong),
        ("STOCKD__AUTH__CLIENTS".to_string(), client),
        (
            "STOCKD__MYSQL__URL".to_string(),
            "mysql://stockd_app:pw@db:3306/stockd".to_string(),
        ),
        (
            "STOCKD__AMQP__URL".to_string(),
            "amqp://stockd_app:pw@rabbitmq:5672/%2f".to_string(),
        ),
    ];
    assert!(stockd::config::Settings::load_with_vars(&dir, "production", &vars).is_ok());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_stockd"))
        .args(["config", "check"])
        .env("STOCKD_ENV", "production")
        .env("STOCKD_CONFIG_DIR", &dir)
        .env("STOCKD__ADMIN__TOKEN", "dev-admin-token")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("admin.token"));
    let vars = [("STOCKD__AMQP__URL".to_string(), "not a url".to_string())];
    let err = stockd::config_check::load_with_vars(&dir, "local", &vars)
        .unwrap_err()
        .to_string();
    assert!(err.contains("amqp.url"), "{err}");
}

/// A client that never finishes its request head (slowloris) holds its
/// connection at most the request-head timeout (5 s): stockd answers 408 or
/// closes it, and a well-behaved client on another connection is served
/// meanwhile (issue 48: no explicit connection limits).
#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::spawn().await;
    let addr = app.base.trim_start_matches("http://").to_string();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /livez HTTP/1.1\r\nHost: stockd\r\nX-Slow: ")
        .await
        .unwrap();
    let started = Instant::now();
    assert_eq!(app.get("/livez").await.status(), 200, "others are served");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), slow.read_to_end(&mut answer)).await;
    let waited = started.elapsed();
    assert!(
        read.is_ok(),
        "the slow connection was still open after 20 s"
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "cut off with {text:?}"
    );
    assert!(waited >= Duration::from_secs(4), "cut off after {waited:?}");
    app.cleanup().await;
}
