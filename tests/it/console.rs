//! The operator console: `GET /v1/admin/overview` over HTTP, and `/console`
//! driven in headless Chromium (WebDriver) through a small live sale.

mod webdriver;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{TestApp, TestOptions, ADMIN_TOKEN};
use webdriver::Browser;

/// How long the page may take to show a change (it polls once a second).
const SEEN_WITHIN: Duration = Duration::from_secs(15);

fn with_admin_listener() -> TestOptions {
    TestOptions {
        tweak: Some(Arc::new(|s| s.admin.bind = Some("127.0.0.1:0".into()))),
        ..TestOptions::default()
    }
}

async fn overview(app: &TestApp, base: &str, token: &str) -> (u16, Value) {
    let resp = app
        .client
        .get(format!("{base}/v1/admin/overview"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Creates a SKU through the admin listener.
async fn create_sku(app: &TestApp, sku: u64, total: i64, limit: i64) {
    let resp = app
        .client
        .put(format!("{}/v1/admin/skus/{sku}", app.admin_base().unwrap()))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"total_stock": total, "limit_per_user": limit}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
}

/// The overview needs the admin token, lives on the admin listener only, and
/// shows each SKU as both stores see it once the pipeline drained.
#[tokio::test]
async fn the_overview_needs_the_token_and_shows_both_stores() {
    let app = TestApp::with(with_admin_listener()).await;
    let admin = app.admin_base().unwrap();
    create_sku(&app, 7, 10, 5).await;
    for (rid, user, count) in [("a", 1, 2), ("b", 2, 1)] {
        assert_eq!(app.reserve(7, rid, user, count).await.status(), 201);
    }
    assert_eq!(app.cancel(7, "b").await.0, 200);
    app.wait_drained(7).await;

    let (status, body) = overview(&app, &admin, "wrong-token").await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "UNAUTHORIZED");
    let (status, _) = overview(&app, &app.base, ADMIN_TOKEN).await;
    assert_eq!(status, 404, "the public listener hides the overview");
    let public_page = app
        .client
        .get(format!("{}/console", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        public_page.status(),
        404,
        "the public listener hides the console"
    );

    // The cache may hold a gather from before the drain for up to a second:
    // wait for one that shows the cancel, then check it whole.
    app.eventually("an overview after the drain", SEEN_WITHIN, || async {
        let (_, o) = overview(&app, &admin, ADMIN_TOKEN).await;
        o["skus"][0]["released"] == 1 && o["skus"][0]["redis_available"] == 8
    })
    .await;
    let (status, o) = overview(&app, &admin, ADMIN_TOKEN).await;
    assert_eq!(status, 200, "{o}");
    let sku = &o["skus"][0];
    assert_eq!(sku["sku_id"], 7);
    assert_eq!(sku["total_stock"], 10);
    assert_eq!(sku["redis_available"], 8);
    assert_eq!(sku["mysql_available"], 8);
    assert_eq!(
        (sku["reserved"].as_u64(), sku["released"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(sku["sold_out"], false);
    assert_eq!(o["skus_truncated"], false);
    for dependency in ["redis", "mysql", "broker"] {
        assert_eq!(o["health"][dependency], true, "{dependency}: {o}");
    }
    assert_eq!(o["pipeline"]["dlq_count"], 0);
    assert_eq!(o["pipeline"]["consumers"], 1);
    assert!(o["reservations"]["accepted"].as_u64().unwrap() >= 2);
    assert!(o["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n["name"] == o["node"]));

    let page = app
        .client
        .get(format!("{admin}/console"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(page.text().await.unwrap().contains("/console/console.js"));
    app.cleanup().await;
}

/// An operator signs in (a wrong token is refused first), watches SKU 1's stock
/// fall while buyers reserve, sees the sold-out badge after the last unit, warms
/// the SKU up and runs a reconcile check through the page's confirmations, and
/// the page fits a phone.
/// Saves a screenshot to target/console.png (and to
/// `$STOCKD_CONSOLE_SCREENSHOT` when set: `docs/console.png` is made so).
#[tokio::test]
async fn an_operator_watches_a_sale_sell_out_and_warms_up_in_chromium() {
    tokio::task::spawn_blocking(webdriver::ensure_installed)
        .await
        .unwrap();
    let app = TestApp::with(with_admin_listener()).await;
    let admin = app.admin_base().unwrap();
    create_sku(&app, 1, 5, 5).await;
    create_sku(&app, 2, 400, 3).await;
    create_sku(&app, 3, 120, 2).await;
    let browser = Browser::start(1280, 1300).await;
    browser.goto(&format!("{admin}/console")).await;

    browser.type_into("#token", "not-the-token").await;
    browser.click("#signin button[type=submit]").await;
    browser
        .wait_text("#signin-error", SEEN_WITHIN, |t| t.contains("refused"))
        .await;
    let hidden = browser
        .script(
            "return document.getElementById('dashboard').hidden;",
            json!([]),
        )
        .await;
    assert_eq!(hidden, true, "a wrong token shows no data");

    browser.type_into("#token", ADMIN_TOKEN).await;
    browser.click("#signin button[type=submit]").await;
    browser
        .wait_text("#sku-1-redis", SEEN_WITHIN, |t| t == "5")
        .await;
    browser
        .wait_text("#sku-1-badge", SEEN_WITHIN, |t| t == "On sale")
        .await;

    assert_eq!(app.reserve(1, "first", 1, 2).await.status(), 201);
    browser
        .wait_text("#sku-1-redis", SEEN_WITHIN, |t| t == "3")
        .await;
    // A few seconds of traffic on the other SKUs, for the rate chart.
    for i in 0..20u64 {
        let sku = 2 + i % 2;
        let status = app
            .reserve(sku, &format!("busy-{i}"), 100 + i, 1 + (i % 2) as u32)
            .await
            .status();
        assert_eq!(status, 201);
        // About time itself: traffic spread over seconds, so the page's rate
        // chart (one point a second) has something to draw.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(app.reserve(1, "last", 2, 3).await.status(), 201);
    assert_eq!(app.reserve(1, "late", 3, 1).await.status(), 409);
    browser
        .wait_text("#sku-1-redis", SEEN_WITHIN, |t| t == "0")
        .await;
    browser
        .wait_text("#sku-1-badge", SEEN_WITHIN, |t| t == "Sold out")
        .await;

    app.wait_drained(1).await;
    browser.click("#sku-1-warmup").await;
    browser.click("#confirm-ok").await;
    let done = browser
        .wait_text("#action-result", SEEN_WITHIN, |t| !t.is_empty())
        .await;
    assert!(done.starts_with("Warm-up of SKU 1 done"), "{done}");
    browser
        .wait_text("#sku-1-mysql", SEEN_WITHIN, |t| t == "0")
        .await;

    app.wait_drained(2).await;
    app.wait_drained(3).await;
    browser.click("#reconcile").await;
    browser.click("#confirm-ok").await;
    let done = browser
        .wait_text("#action-result", SEEN_WITHIN, |t| {
            t.starts_with("Reconcile")
        })
        .await;
    assert_eq!(done, "Reconcile check done: 3 SKUs, 0 not OK.");
    browser
        .wait_text("#sku-1-verdict", SEEN_WITHIN, |t| t == "OK")
        .await;
    browser
        .wait_text("#health", SEEN_WITHIN, |t| t.contains("Broker up"))
        .await;

    let png = browser.screenshot().await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/console.png");
    std::fs::write(&target, &png).unwrap();
    if let Ok(path) = std::env::var("STOCKD_CONSOLE_SCREENSHOT") {
        std::fs::write(path, &png).unwrap();
    }

    browser.resize(390, 844).await;
    let overflow = browser
        .script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
            json!([]),
        )
        .await;
    assert_eq!(overflow, 0, "the page scrolls sideways at phone width");
    app.cleanup().await;
}
