//! Issue 48 item 3 (API4, unrestricted resource consumption): `/readyz` is
//! computed in the background, at most one round of store checks a second,
//! so a loop of probes costs the stores nothing; `?verbose` shows its detail
//! to the admin credential only; with a separate admin listener the public
//! `/openapi.json` leaves the admin surface out. Store costs are counted by
//! the api's own round counter (`Readiness::checks_run`): the shared Redis
//! and MySQL are busy with other tests, their server-side counters are noisy.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stockd::config::{ClientSettings, Scope};
use stockd::roles::api::auth::sha256_hex;

use crate::helpers::{send_for_json, TestApp, TestOptions, ADMIN_TOKEN};
use crate::proxy::{FaultProxy, Mode};

const ADMIN_CLIENT_TOKEN: &str = "tok-readiness-ops-51d0";
const READ_CLIENT_TOKEN: &str = "tok-readiness-reader-0c3a";

/// 200 probes in a row: every one answered (no rate limit on the probe), and
/// the stores saw at most one round of checks per second meanwhile. Draining
/// turns readiness false at once.
#[tokio::test]
async fn two_hundred_probes_cost_the_stores_a_few_checks() {
    let app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    let readiness = app.api_state().readiness.clone();
    let before = readiness.checks_run();
    let start = Instant::now();
    for i in 0..200 {
        let resp = app.get("/readyz").await;
        assert_eq!(resp.status(), 200, "probe {i}");
    }
    let elapsed = start.elapsed();
    let ran = readiness.checks_run() - before;
    // One round a second, plus the one that may start at either edge.
    let bound = elapsed.as_secs() + 2;
    assert!(
        ran <= bound,
        "{ran} rounds of store checks for 200 probes in {elapsed:?}"
    );

    let state = app.api_state();
    state.draining.store(true, Ordering::SeqCst);
    let (status, body) = app.get_json("/readyz").await;
    assert_eq!((status, body), (503, json!({"status": "not_ready"})));
    state.draining.store(false, Ordering::SeqCst);
    assert_eq!(app.get("/readyz").await.status(), 200);
    app.cleanup().await;
}

/// Auth required, one client with scope `admin` and one with scope `read`.
fn with_clients() -> TestOptions {
    let client = |name: &str, token: &str, scope| ClientSettings {
        name: name.into(),
        token_sha256: Some(sha256_hex(token.as_bytes())),
        cert_subject: None,
        scopes: vec![scope],
    };
    TestOptions {
        consumer: false,
        tweak: Some(Arc::new(move |s| {
            s.auth.required = true;
            s.auth.clients = vec![
                client("ops", ADMIN_CLIENT_TOKEN, Scope::Admin),
                client("reader", READ_CLIENT_TOKEN, Scope::Read),
            ];
        })),
        ..TestOptions::default()
    }
}

async fn readyz_as(app: &TestApp, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = app.client.get(app.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    send_for_json(request).await
}

/// `?verbose` lists the checks to the admin token and to a client with scope
/// `admin`; anyone else (no token, a read client, an unknown token) gets the
/// plain answer, not an error.
#[tokio::test]
async fn verbose_detail_is_shown_to_the_admin_credential_only() {
    let app = TestApp::with(with_clients()).await;
    let plain = json!({"status": "ready"});
    for (who, token) in [
        ("anonymous", None),
        ("read client", Some(READ_CLIENT_TOKEN)),
        ("unknown token", Some("tok-nobody")),
    ] {
        for path in ["/readyz?verbose", "/readyz?verbose=1"] {
            let answer = readyz_as(&app, path, token).await;
            assert_eq!(answer, (200, plain.clone()), "{who} {path}");
        }
    }
    let detail = json!({
        "status": "ready",
        "checks": {
            "redis": true, "scripts_loaded": true, "mysql": true, "amqp": true,
            "not_draining": true, "mysql_breaker_closed": true,
        },
    });
    for (who, token) in [
        ("admin token", ADMIN_TOKEN),
        ("admin client", ADMIN_CLIENT_TOKEN),
    ] {
        let answer = readyz_as(&app, "/readyz?verbose", Some(token)).await;
        assert_eq!(answer, (200, detail.clone()), "{who}");
        // Without the flag the admin gets the plain answer too.
        let answer = readyz_as(&app, "/readyz", Some(token)).await;
        assert_eq!(answer, (200, plain.clone()), "{who} without ?verbose");
    }
    app.cleanup().await;
}

/// MySQL behind a proxy taken down: `/readyz` turns 503 within a few seconds
/// (the admin sees `"mysql": false`), and 200 again soon after it is back.
#[tokio::test]
async fn readiness_follows_mysql_down_and_back_within_seconds() {
    let proxy = FaultProxy::start("127.0.0.1:3306").await;
    let port = proxy.port;
    let app = TestApp::with(TestOptions {
        consumer: false,
        tweak: Some(Arc::new(move |s| {
            // prefer_socket=false: or mysql_async bypasses the proxy.
            s.mysql.url = s
                .mysql
                .url
                .replace("127.0.0.1:3306", &format!("127.0.0.1:{port}"))
                + "?prefer_socket=false";
            s.mysql.connect_timeout_secs = 1;
            s.mysql.query_timeout_ms = 1000;
        })),
        ..TestOptions::default()
    })
    .await;
    assert_eq!(app.get("/readyz").await.status(), 200);
    proxy.set(Mode::Down);
    app.eventually("/readyz 503", FLIP_LIMIT, || async {
        app.get("/readyz").await.status() == 503
    })
    .await;
    let (status, body) = app.get_json_admin("/readyz?verbose").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["checks"]["mysql"], false, "{body}");
    assert_eq!(body["checks"]["redis"], true, "{body}");
    proxy.set(Mode::Pass);
    app.eventually("/readyz 200 again", FLIP_LIMIT, || async {
        app.get("/readyz").await.status() == 200
    })
    .await;
    app.cleanup().await;
}

/// How long a store's outage or return may take to show (a round a second,
/// each check bounded by its store's timeout); a busy machine is slower.
const FLIP_LIMIT: Duration = Duration::from_secs(15);

/// The paths of the admin surface (contract §13).
fn admin_paths(doc: &Value) -> Vec<String> {
    doc["paths"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|p| {
            p.starts_with("/v1/admin/") || p.starts_with("/metrics") || p.starts_with("/console")
        })
        .cloned()
        .collect()
}

/// `admin.bind` set: the public listener's `/openapi.json` has no admin
/// route and no admin security scheme; the admin listener serves no document
/// (as before).
#[tokio::test]
async fn the_split_public_openapi_has_no_admin_route() {
    let app = TestApp::with(TestOptions {
        consumer: false,
        tweak: Some(Arc::new(|s| s.admin.bind = Some("127.0.0.1:0".into()))),
        ..TestOptions::default()
    })
    .await;
    let (status, doc) = app.get_json("/openapi.json").await;
    assert_eq!(status, 200);
    assert_eq!(admin_paths(&doc), Vec::<String>::new());
    assert!(doc["paths"]["/v1/skus/{sku_id}/reservations"]["post"].is_object());
    assert!(doc["paths"]["/readyz"]["get"].is_object());
    let schemes = &doc["components"]["securitySchemes"];
    assert!(schemes["admin_token"].is_null(), "{schemes}");
    assert!(schemes["client_token"].is_object(), "{schemes}");
    let public: Value =
        serde_json::from_str(stockd::roles::api::routes::openapi::public_document()).unwrap();
    assert_eq!(doc, public);
    let admin = app.admin_base().expect("an admin listener");
    let on_admin = app.get_url(&format!("{admin}/openapi.json")).await;
    assert_eq!(on_admin.status(), 404);
    app.cleanup().await;
}

/// One listener: `/openapi.json` still describes the admin routes.
#[tokio::test]
async fn the_single_listener_openapi_keeps_the_admin_routes() {
    let app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    let (status, doc) = app.get_json("/openapi.json").await;
    assert_eq!(status, 200);
    let admin = admin_paths(&doc);
    assert!(
        admin.contains(&"/v1/admin/reconcile".to_string()),
        "{admin:?}"
    );
    assert!(admin.contains(&"/metrics".to_string()), "{admin:?}");
    assert!(doc["components"]["securitySchemes"]["admin_token"].is_object());
    app.cleanup().await;
}
