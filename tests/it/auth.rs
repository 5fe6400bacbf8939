//! Client identity and scopes on the public API (issue 27, item 1): with
//! `auth.required` every public route takes only a known client with its scope,
//! refusals touch no store, each client has its own rate limit and metric label,
//! and production refuses an open API. The shared test config keeps auth off;
//! these tests switch it on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use stockd::config::{ClientSettings, Scope, Settings};
use stockd::roles::api::auth::sha256_hex;

use crate::helpers::{PrivateRedis, TestApp, TestOptions, ADMIN_TOKEN};

/// One client per scope (tokens of a test, never of a deployment).
const CLIENTS: [(&str, &str, Scope); 4] = [
    ("reserver", "tok-reserver-3f1c", Scope::Reserve),
    ("reader", "tok-reader-9a0b", Scope::Read),
    ("lifecycler", "tok-lifecycler-77d2", Scope::Lifecycle),
    ("ops", "tok-ops-c4e8", Scope::Admin),
];

/// The token of the client with `scope`.
pub(crate) fn token(scope: Scope) -> &'static str {
    CLIENTS.iter().find(|c| c.2 == scope).unwrap().1
}

fn client(name: &str, token: &str, scopes: Vec<Scope>) -> ClientSettings {
    ClientSettings {
        name: name.into(),
        token_sha256: Some(sha256_hex(token.as_bytes())),
        cert_subject: None,
        scopes,
    }
}

/// Auth required with the clients of [`CLIENTS`], then `more` on the settings.
pub(crate) fn closed(more: impl Fn(&mut Settings) + Send + Sync + 'static) -> TestOptions {
    TestOptions {
        tweak: Some(Arc::new(move |s: &mut Settings| {
            s.auth.required = true;
            s.auth.clients = CLIENTS
                .iter()
                .map(|(name, tok, scope)| client(name, tok, vec![*scope]))
                .collect();
            more(s);
        })),
        ..TestOptions::default()
    }
}

/// An answer: status, headers, JSON body (`Null` when not JSON).
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

async fn call(app: &TestApp, method: Method, path: &str, token: Option<&str>) -> Answer {
    let mut req = app
        .client
        .request(method.clone(), format!("{}{path}", app.base));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if method == Method::POST && path.ends_with("/reservations") {
        req = req.json(&json!({"request_id": "refused-or-new", "user_id": 9, "count": 1}));
    }
    let resp = req.send().await.unwrap();
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.json().await.unwrap_or(Value::Null),
    }
}

/// What a refusal must leave as it was: Redis' keys, the Lua script calls, the
/// ledger.
pub(crate) async fn stores_snapshot(
    app: &TestApp,
    redis: &PrivateRedis,
) -> (Vec<String>, u64, String) {
    let mut keys = app.redis_keys().await;
    keys.sort();
    let ledger = format!("{:?}", {
        let mut rows: Vec<_> = app.ledger_by_status(1).await.into_iter().collect();
        rows.sort();
        rows
    });
    (keys, redis.script_calls().await, ledger)
}

/// The public routes, with the scope each needs.
fn routes() -> Vec<(Method, &'static str, Scope)> {
    vec![
        (Method::POST, "/v1/skus/1/reservations", Scope::Reserve),
        (Method::GET, "/v1/skus/1/reservations/r1", Scope::Read),
        (
            Method::POST,
            "/v1/skus/1/reservations/r1/confirm",
            Scope::Lifecycle,
        ),
        (
            Method::POST,
            "/v1/skus/1/reservations/r2/cancel",
            Scope::Lifecycle,
        ),
        (Method::GET, "/v1/skus/1", Scope::Read),
    ]
}

/// Every route refuses no token and a wrong token (401 UNAUTHENTICATED with
/// `WWW-Authenticate: Bearer`) and every client without its scope (403
/// FORBIDDEN), without a Redis script call or a write anywhere; the client
/// with the scope gets its answer.
#[tokio::test]
async fn each_route_takes_only_its_scope_and_refusals_touch_no_store() {
    let redis = PrivateRedis::start().await;
    let mut opts = closed(|_| {});
    opts.redis_url = Some(redis.url.clone());
    let app = TestApp::with(opts).await;
    app.create_sku(1, 100, 10).await;
    for rid in ["r1", "r2"] {
        let body = json!({"request_id": rid, "user_id": 1, "count": 1});
        let resp = app
            .client
            .post(format!("{}/v1/skus/1/reservations", app.base))
            .bearer_auth(token(Scope::Reserve))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
    }
    app.wait_ledger_rows(2).await;
    app.wait_drained(1).await;
    let before = stores_snapshot(&app, &redis).await;
    for (method, path, scope) in routes() {
        for presented in [None, Some("tok-nobody-has")] {
            let refused = call(&app, method.clone(), path, presented).await;
            assert_eq!(refused.status, 401, "{method} {path} {presented:?}");
            assert_eq!(refused.body["code"], "UNAUTHENTICATED", "{method} {path}");
            assert_eq!(refused.headers["www-authenticate"], "Bearer");
            assert_eq!(refused.headers["content-type"], "application/problem+json");
        }
        for (name, other, other_scope) in CLIENTS {
            if other_scope == scope {
                continue;
            }
            let refused = call(&app, method.clone(), path, Some(other)).await;
            assert_eq!(refused.status, 403, "{method} {path} as {name}");
            assert_eq!(refused.body["code"], "FORBIDDEN", "{method} {path}");
            assert!(refused.body["detail"]
                .as_str()
                .unwrap()
                .contains(scope.as_str()));
        }
    }
    assert_eq!(
        stores_snapshot(&app, &redis).await,
        before,
        "refusals wrote or ran nothing"
    );
    assert_eq!(
        app.ledger_status(1, "r1").await.as_deref(),
        Some("RESERVED")
    );
    // r1 and r2 are the reserver's: another client reads, confirms and
    // cancels them as unknown (holds belong to their client, `auth_owners`),
    // past the gate and its own scope check all the same.
    let expected = [201, 404, 404, 404, 200];
    for ((method, path, scope), want) in routes().into_iter().zip(expected) {
        let answer = call(&app, method.clone(), path, Some(token(scope))).await;
        assert_eq!(answer.status, want, "{method} {path}: {}", answer.body);
    }
    app.wait_ledger_rows(3).await;
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// The probes and the document stay open; the admin routes take `admin.token`
/// or a client with scope `admin`, and no other client.
#[tokio::test]
async fn probes_stay_open_and_admin_routes_take_the_admin_scope() {
    let app = TestApp::with(closed(|_| {})).await;
    for path in ["/livez", "/readyz", "/openapi.json"] {
        assert_eq!(
            call(&app, Method::GET, path, None).await.status,
            200,
            "{path}"
        );
    }
    let put = |token: &'static str| {
        app.client
            .put(format!("{}/v1/admin/skus/7", app.base))
            .bearer_auth(token)
            .json(&json!({"total_stock": 5, "limit_per_user": 1}))
            .send()
    };
    assert_eq!(put(token(Scope::Admin)).await.unwrap().status(), 200);
    assert_eq!(put(ADMIN_TOKEN).await.unwrap().status(), 200);
    let refused = put(token(Scope::Read)).await.unwrap();
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "UNAUTHORIZED");
    app.cleanup().await;
}

/// Attempts a token bucket of `per_second` and `burst` may let through in
/// `elapsed` (plus one for a refill landing during the last request).
fn bucket_allows(per_second: f64, burst: u32, elapsed: Duration) -> usize {
    (f64::from(burst) + per_second * elapsed.as_secs_f64()).floor() as usize + 1
}

/// One client at many times its limit: 429 RATE_LIMITED with Retry-After, no
/// Lua script run for a limited request, and another client keeps its own
/// bucket. The answers are counted under each client's `client` label.
#[tokio::test]
async fn a_client_over_its_limit_gets_429_before_redis_and_is_labelled_in_metrics() {
    let redis = PrivateRedis::start().await;
    let mut opts = closed(|s| {
        s.limits.per_client_rps = 2.0;
        s.limits.per_client_burst = 4;
    });
    opts.redis_url = Some(redis.url.clone());
    let app = TestApp::with(opts).await;
    app.create_sku(1, 1000, 1000).await;
    let before = redis.script_calls().await;
    let started = Instant::now();
    let mut admitted = 0;
    for i in 0..30 {
        let resp = app
            .client
            .post(format!("{}/v1/skus/1/reservations", app.base))
            .bearer_auth(token(Scope::Reserve))
            .json(&json!({"request_id": format!("c{i}"), "user_id": 100 + i, "count": 1}))
            .send()
            .await
            .unwrap();
        match resp.status().as_u16() {
            201 => admitted += 1,
            429 => {
                assert!(resp.headers().contains_key("retry-after"));
                let body: Value = resp.json().await.unwrap();
                assert_eq!(body["code"], "RATE_LIMITED");
            }
            other => panic!("unexpected {other}"),
        }
    }
    let allowed = bucket_allows(2.0, 4, started.elapsed());
    assert!(
        admitted >= 1 && admitted <= allowed,
        "{admitted} admitted, bucket allows {allowed}"
    );
    assert_eq!(redis.script_calls().await - before, admitted as u64);
    let other = call(&app, Method::GET, "/v1/skus/1", Some(token(Scope::Read))).await;
    assert_eq!(other.status, 200, "clients do not share a bucket");
    let _ = call(&app, Method::GET, "/v1/skus/1", None).await;
    let text = app.metrics_text().await;
    for series in [
        r#"route="/v1/skus/{sku_id}/reservations",status="201",client="reserver"}"#,
        r#"route="/v1/skus/{sku_id}/reservations",status="429",client="reserver"}"#,
        r#"route="/v1/skus/{sku_id}",status="200",client="reader"}"#,
        r#"route="/v1/skus/{sku_id}",status="401",client="anonymous"}"#,
    ] {
        assert!(text.contains(series), "missing {series}");
    }
    assert!(text.contains("stockd_client_auth_refused_total{reason=\"missing\"}"));
    app.wait_ledger_rows(admitted as u64).await;
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// `STOCKD_ENV=production` refuses `auth.required: false` and an empty
/// `auth.clients`, naming the key, in `stockd config check` as at start-up;
/// the same with a client from the environment (a YAML list) passes.
#[test]
fn production_refuses_an_open_api_or_no_client_naming_the_key() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config");
    let check = |vars: &[(&str, &str)]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stockd"))
            .args(["config", "check"])
            .env("STOCKD_ENV", "production")
            .env("STOCKD_CONFIG_DIR", &dir)
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stderr) = check(&[]);
    assert!(!ok && stderr.contains("`auth.clients`"), "{stderr}");
    let clients = format!(
        "[{{name: orders, token_sha256: \"{}\", scopes: [reserve, read, lifecycle]}}]",
        sha256_hex(b"a-production-client-token")
    );
    let (ok, stderr) = check(&[
        ("STOCKD__AUTH__CLIENTS", &clients),
        ("STOCKD__AUTH__REQUIRED", "false"),
    ]);
    assert!(!ok && stderr.contains("`auth.required`"), "{stderr}");
    // With the stores' own users (base.yaml's root and guest are refused).
    let (ok, stderr) = check(&[
        ("STOCKD__AUTH__CLIENTS", &clients),
        ("STOCKD__MYSQL__URL", "mysql://stockd_app:pw@db:3306/stockd"),
        (
            "STOCKD__AMQP__URL",
            "amqp://stockd_app:pw@rabbitmq:5672/%2f",
        ),
    ]);
    assert!(ok, "{stderr}");
}

/// `--bind` is the last layer of the configuration and is checked like the
/// others: in production, a public bind without TLS (nor a proxy that
/// terminates it) is refused naming `http.bind` (issue 48: the flag
/// replaced `http.bind` after the production check had run).
#[test]
fn the_bind_flag_passes_the_production_check_too() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config");
    let clients = format!(
        "[{{name: orders, token_sha256: \"{}\", scopes: [reserve, read, lifecycle]}}]",
        sha256_hex(b"a-production-client-token")
    );
    let check = |bind: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stockd"))
            .args(["--bind", bind, "config", "check"])
            .env("STOCKD_ENV", "production")
            .env("STOCKD_CONFIG_DIR", &dir)
            .env("STOCKD__AUTH__CLIENTS", &clients)
            .env("STOCKD__MYSQL__URL", "mysql://stockd_app:pw@db:3306/stockd")
            .env(
                "STOCKD__AMQP__URL",
                "amqp://stockd_app:pw@rabbitmq:5672/%2f",
            )
            .env("STOCKD__HTTP__BIND", "127.0.0.1:8080")
            .env("STOCKD__HTTP__TLS_TERMINATED_BY_PROXY", "false")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stderr) = check("127.0.0.1:9090");
    assert!(ok, "{stderr}");
    let (ok, stderr) = check("0.0.0.0:9090");
    assert!(!ok && stderr.contains("`http.bind`"), "{stderr}");
}

/// The bench's HTTP phases against an auth-required target (`stockd-bench
/// --target … --token …`): with the client token every reservation is
/// admitted and the phase checks clean over HTTP; without it they are refused
/// and the phase reports failures.
#[tokio::test]
async fn the_bench_drives_an_auth_required_target_with_its_client_token() {
    use stockd_bench::drive::load::Plan;
    use stockd_bench::phases::reserve::reserve;
    use stockd_bench::stack::check::Target;

    const BENCH_TOKEN: &str = "tok-bench-5e21";
    let app = TestApp::with(closed(|s| {
        let scopes = vec![Scope::Reserve, Scope::Read, Scope::Lifecycle];
        s.auth.clients.push(client("bench", BENCH_TOKEN, scopes));
    }))
    .await;
    let addr = app.base.trim_start_matches("http://").parse().unwrap();
    let plan = || Plan {
        requests: 50,
        max_duration: Duration::from_secs(20),
        rate_per_sec: None,
    };
    for (sku, client_token) in [(11, Some(BENCH_TOKEN)), (12, None)] {
        let target = Target {
            addr,
            admin_token: ADMIN_TOKEN,
            client_token,
            stores: None,
        };
        let checked = reserve(&target, "reserve", "reserve".into(), sku, plan(), 4)
            .await
            .unwrap();
        let refused = checked.violations.iter().any(|v| v.contains("401"));
        match client_token {
            Some(_) => assert!(checked.violations.is_empty(), "{:?}", checked.violations),
            None => assert!(refused, "{:?}", checked.violations),
        }
        app.wait_drained(sku).await;
    }
    app.cleanup().await;
}

/// `config/local.yaml` (`make run`, the README walk-through) leaves the API
/// open: a `stockd --role api` child with it says so in one WARN line, and a
/// reservation, its read-back and its confirm need no token.
#[tokio::test]
async fn the_local_config_is_open_and_says_so_at_start_up() {
    let app = TestApp::spawn().await;
    app.create_sku(1, 10, 2).await;
    let port = crate::ports::free_port();
    let log = std::env::temp_dir().join(format!("stockd-auth-{}.log", app.id));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stockd"));
    cmd.args(["--role", "api"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd.envs(app.cli_env())
        .env("STOCKD_ENV", "local")
        .env("STOCKD__HTTP__BIND", format!("127.0.0.1:{port}"))
        .env("STOCKD__LOGGING__FORMAT", "json");
    let mut api = crate::owned::OwnedProcess::spawn("stockd --role api", cmd, &log);
    let base = format!("http://127.0.0.1:{port}");
    let readyz = format!("{base}/readyz");
    app.eventually(
        "the child api is ready",
        Duration::from_secs(30),
        || async { matches!(app.client.get(&readyz).send().await, Ok(r) if r.status() == 200) },
    )
    .await;
    let warned: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("auth.required is false"))
        .map(str::to_string)
        .collect();
    assert_eq!(warned.len(), 1, "{}", api.log_tail());
    assert!(warned[0].contains("WARN"), "{}", warned[0]);
    let reserve = app
        .client
        .post(format!("{base}/v1/skus/1/reservations"))
        .json(&json!({"request_id": "order-1001", "user_id": 42, "count": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(reserve.status(), 201);
    let read = app
        .client
        .get(format!("{base}/v1/skus/1/reservations/order-1001"));
    assert_eq!(read.send().await.unwrap().status(), 200);
    let confirm = app
        .client
        .post(format!("{base}/v1/skus/1/reservations/order-1001/confirm"))
        .send()
        .await;
    assert_eq!(confirm.unwrap().status(), 200);
    api.terminate();
    let _ = std::fs::remove_file(&log);
    app.wait_drained(1).await;
    app.cleanup().await;
}
