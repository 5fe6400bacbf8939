//! The operator console: `GET /v1/admin/overview` over HTTP, and `/console`
//! driven in headless Chromium and in headless Firefox ESR (WebDriver) through
//! a small live sale, then checked at phone width.

mod webdriver;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{send_for_json, TestApp, TestOptions, ADMIN_TOKEN};
use webdriver::{Browser, Engine};

/// How long the page may take to show a change (it polls once a second).
const SEEN_WITHIN: Duration = Duration::from_secs(15);
/// Page polls (one a second) the busy traffic spans: a rate line of several
/// points for the screenshot.
const TRAFFIC_POLLS: u64 = 4;
/// Reservations sent before each of those polls (20 in all, as before).
const RESERVES_PER_POLL: u64 = 5;

fn with_admin_listener() -> TestOptions {
    TestOptions {
        tweak: Some(Arc::new(|s| s.admin.bind = Some("127.0.0.1:0".into()))),
        ..TestOptions::default()
    }
}

async fn overview(app: &TestApp, base: &str, token: &str) -> (u16, Value) {
    let url = format!("{base}/v1/admin/overview");
    send_for_json(app.client.get(url).bearer_auth(token)).await
}

/// Creates a SKU through the admin listener.
async fn create_sku(app: &TestApp, sku: u64, total: i64, limit: i64) {
    let body = json!({"total_stock": total, "limit_per_user": limit});
    let admin = app.admin_base().unwrap();
    let (status, answer) = app.put_sku_json_at(&admin, sku, &body).await;
    assert_eq!(status, 200, "{answer}");
}

/// The overview needs the admin token, lives on the admin listener only, and
/// shows each SKU as both stores see it once the pipeline drained.
#[tokio::test]
async fn the_overview_needs_the_token_and_shows_both_stores() {
    let app = TestApp::with(with_admin_listener()).await;
    let admin = app.admin_base().unwrap();
    create_sku(&app, 7, 10, 5).await;
    for (rid, user, count) in [("a", 1, 2), ("b", 2, 1)] {
        app.reserve_ok(7, rid, user, count).await;
    }
    assert_eq!(app.cancel(7, "b").await.0, 200);
    create_sku(&app, 8, 10, 5).await;
    for (order_id, user) in [("cart-paid", 4), ("cart-open", 5)] {
        let body = json!({"order_id": order_id, "user_id": user,
                          "lines": [{"sku_id": 7, "count": 1}, {"sku_id": 8, "count": 1}]});
        let resp = app
            .client
            .post(format!("{}/v1/orders", app.base))
            .json(&body);
        assert_eq!(resp.send().await.unwrap().status(), 201, "{order_id}");
    }
    app.eventually("cart-paid in MySQL", SEEN_WITHIN, || async {
        app.get_json("/v1/orders/cart-paid").await.1["persisted"] == true
    })
    .await;
    assert_eq!(app.post_json("/v1/orders/cart-paid/confirm").await.0, 200);
    app.wait_drained(7).await;
    app.wait_drained(8).await;

    let (status, body) = overview(&app, &admin, "wrong-token").await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "UNAUTHORIZED");
    let (status, _) = overview(&app, &app.base, ADMIN_TOKEN).await;
    assert_eq!(status, 404, "the public listener hides the overview");
    let public_page = app.get("/console").await;
    assert_eq!(
        public_page.status(),
        404,
        "the public listener hides the console"
    );

    // The cache may hold a gather from before the drain for up to a second:
    // wait for one that shows the cancel, then check it whole.
    app.eventually("an overview after the drain", SEEN_WITHIN, || async {
        let (_, o) = overview(&app, &admin, ADMIN_TOKEN).await;
        o["skus"][0]["released"] == 1 && o["skus"][0]["redis_available"] == 6
    })
    .await;
    let (status, o) = overview(&app, &admin, ADMIN_TOKEN).await;
    assert_eq!(status, 200, "{o}");
    let sku = &o["skus"][0];
    assert_eq!(sku["sku_id"], 7);
    assert_eq!(sku["total_stock"], 10);
    assert_eq!(sku["redis_available"], 6);
    assert_eq!(sku["mysql_available"], 6);
    assert_eq!(
        (
            sku["reserved"].as_u64(),
            sku["confirmed"].as_u64(),
            sku["released"].as_u64()
        ),
        (Some(2), Some(1), Some(1)),
        "a, cart-open's line; cart-paid's line; b"
    );
    assert_eq!(
        o["orders"],
        json!({"reserved": 1, "confirmed": 1, "released": 0, "rejected": 0}),
        "whole orders by state"
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

    let page = app.get_url(&format!("{admin}/console")).await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(page.text().await.unwrap().contains("/console/console.js"));
    app.cleanup().await;
}

/// The scenario below in Chromium; its desktop screenshot also goes to
/// `$STOCKD_CONSOLE_SCREENSHOT` when set (`docs/console.png` is made so).
#[tokio::test]
async fn an_operator_watches_a_sale_sell_out_and_warms_up_in_chromium() {
    operator_watches_a_sale(Engine::Chromium).await;
}

/// The same scenario in Firefox ESR (geckodriver).
#[tokio::test]
async fn an_operator_watches_a_sale_sell_out_and_warms_up_in_firefox() {
    operator_watches_a_sale(Engine::Firefox).await;
}

/// Where the screenshots and the WebDriver server's log go:
/// target/tmp/console/ (`CARGO_TARGET_TMPDIR`), not committed.
fn output_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An operator signs in (a wrong token is refused first), watches SKU 1's stock
/// fall while buyers reserve, sees the sold-out badge after the last unit, warms
/// the SKU up and runs a reconcile check through the page's confirmations; then
/// at phone width (390×844 CSS pixels) the page does not scroll sideways and SKU
/// 1's id, stock in both stores and badge are on screen and readable; last,
/// the restock form puts 4 units back through an adjustment. Saves
/// `<browser>.png` (1280×1300) and `<browser>-phone.png` to the output dir.
async fn operator_watches_a_sale(engine: Engine) {
    let tools = tokio::task::spawn_blocking(move || webdriver::ensure_installed(engine))
        .await
        .unwrap();
    let out = output_dir();
    let name = engine.name();
    let app = TestApp::with(with_admin_listener()).await;
    let admin = app.admin_base().unwrap();
    create_sku(&app, 1, 5, 5).await;
    create_sku(&app, 2, 400, 3).await;
    create_sku(&app, 3, 120, 2).await;
    let browser = Browser::start(&tools, 1280, 1300, &out.join(format!("{name}-driver.log"))).await;
    browser.goto(&format!("{admin}/console")).await;

    sign_in_after_a_wrong_token(&browser).await;
    sell_sku_one_out_among_busy_traffic(&app, &browser).await;
    warm_up_and_reconcile_from_the_page(&app, &browser).await;
    an_order_shows_by_state(&app, &browser).await;

    let png = browser.screenshot().await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    std::fs::write(out.join(format!("{name}.png")), &png).unwrap();
    if engine == Engine::Chromium {
        if let Ok(path) = std::env::var("STOCKD_CONSOLE_SCREENSHOT") {
            std::fs::write(path, &png).unwrap();
        }
    }
    check_sku_one_at_phone_width(&browser, &out, name).await;
    restock_sku_one_through_an_adjustment(&app, &admin, &browser).await;
    app.cleanup().await;
}

/// Waits until the page shows SKU 1 with `redis` units in Redis and the
/// status badge `badge`.
async fn wait_sku_one(browser: &Browser, redis: &str, badge: &str) {
    browser
        .wait_text("#sku-1-redis", SEEN_WITHIN, |t| t == redis)
        .await;
    browser
        .wait_text("#sku-1-badge", SEEN_WITHIN, |t| t == badge)
        .await;
}

/// A wrong token is refused and shows no data; the admin token shows SKU 1
/// on sale with its 5 units.
async fn sign_in_after_a_wrong_token(browser: &Browser) {
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
    wait_sku_one(browser, "5", "On sale").await;
}

/// SKU 1's stock falls as buyers reserve, with traffic on SKUs 2 and 3 in
/// between, until the page shows it sold out.
async fn sell_sku_one_out_among_busy_traffic(app: &TestApp, browser: &Browser) {
    app.reserve_taken(1, "first", 1, 2).await;
    browser
        .wait_text("#sku-1-redis", SEEN_WITHIN, |t| t == "3")
        .await;
    // Traffic on the other SKUs spread over several of the page's polls, so
    // its rate chart (one point a poll) has a line to draw: each round waits
    // for the page's next poll (its "updated" stamp changes).
    for round in 0..TRAFFIC_POLLS {
        let stamp = browser.text("#status").await;
        for i in round * RESERVES_PER_POLL..(round + 1) * RESERVES_PER_POLL {
            let sku = 2 + i % 2;
            app.reserve_taken(sku, &format!("busy-{i}"), 100 + i, 1 + (i % 2) as u32)
                .await;
        }
        browser
            .wait_text("#status", SEEN_WITHIN, |t| stamp.as_deref() != Some(t))
            .await;
    }
    app.reserve_taken(1, "last", 2, 3).await;
    assert_eq!(app.reserve(1, "late", 3, 1).await.status(), 409);
    wait_sku_one(browser, "0", "Sold out").await;
}

/// An order over SKUs 2 and 3 shows in the orders card as reserved, once
/// the consumer wrote it.
async fn an_order_shows_by_state(app: &TestApp, browser: &Browser) {
    browser
        .wait_text("#orders-reserved", SEEN_WITHIN, |t| t == "0")
        .await;
    let body = json!({"order_id": "cart-1", "user_id": 300,
                      "lines": [{"sku_id": 2, "count": 1}, {"sku_id": 3, "count": 1}]});
    let resp = app
        .client
        .post(format!("{}/v1/orders", app.base))
        .json(&body);
    assert_eq!(resp.send().await.unwrap().status(), 201);
    browser
        .wait_text("#orders-reserved", SEEN_WITHIN, |t| t == "1")
        .await;
}

/// Once drained, a warm-up of SKU 1 and a reconcile check through the
/// page's confirmations: both done, every SKU OK, the broker up.
async fn warm_up_and_reconcile_from_the_page(app: &TestApp, browser: &Browser) {
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
}

/// The restock form of a sold-out SKU 1, total 5 → 9 with its limit
/// unchanged, adds the difference as an adjustment (reservations made
/// meanwhile are kept): the page shows 4 on sale again, and the SKU's
/// movements end with that adjustment.
async fn restock_sku_one_through_an_adjustment(app: &TestApp, admin: &str, browser: &Browser) {
    browser.click("#sku-1-restock").await;
    browser.type_into("#restock-total", "9").await;
    browser.click("#restock button[type=submit]").await;
    browser.click("#confirm-ok").await;
    let done = browser
        .wait_text("#action-result", SEEN_WITHIN, |t| t.starts_with("SKU 1"))
        .await;
    assert!(done.starts_with("SKU 1 adjusted by +4: total 9"), "{done}");
    wait_sku_one(browser, "4", "On sale").await;
    let url = format!("{admin}/v1/admin/skus/1/movements?limit=100");
    let (status, page) = send_for_json(app.client.get(url).bearer_auth(ADMIN_TOKEN)).await;
    assert_eq!(status, 200, "{page}");
    let last = page["movements"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["kind"].as_str(), last["delta"].as_i64()),
        (Some("adjustment"), Some(4)),
        "{last}"
    );
}

/// At 390×844 the page does not scroll sideways and SKU 1's id, stock in
/// both stores and badge are on screen and readable; saves
/// `<name>-phone.png` first.
async fn check_sku_one_at_phone_width(browser: &Browser, out: &std::path::Path, name: &str) {
    browser.resize(390, 844).await;
    // The SKU list at the top of the screen, as an operator would scroll to it.
    browser
        .script(
            "document.getElementById('skus-title').scrollIntoView({block: 'start'});",
            json!([]),
        )
        .await;
    browser
        .wait_text("#sku-1-badge", SEEN_WITHIN, |t| t == "Sold out")
        .await;
    // Saved before the checks, so a failing one can be looked at.
    let png = browser.screenshot().await;
    std::fs::write(out.join(format!("{name}-phone.png")), &png).unwrap();
    let phone = browser.script(PHONE_CHECK, json!([])).await;
    let width = |key: &str| phone[key].as_i64().unwrap();
    assert_eq!(width("innerWidth"), 390, "{name}: {phone}");
    assert!(
        width("scrollWidth") <= width("clientWidth") && width("clientWidth") <= width("innerWidth"),
        "{name}: the page scrolls sideways at phone width: {phone}"
    );
    for (cell, rect) in phone["cells"].as_object().unwrap() {
        assert_eq!(
            rect["onScreen"], true,
            "{name}: {cell} is not fully on screen at phone width: {phone}"
        );
        assert!(
            rect["fontPx"].as_f64().unwrap() >= 12.0,
            "{name}: {cell} is too small to read at phone width: {phone}"
        );
    }
}

/// At phone width: the page's and the viewport's widths, and for SKU 1's id,
/// stock in Redis and MySQL and badge, whether each lies wholly on screen and
/// inside the SKU table's own sideways-scrolling box (a value reachable only by
/// scrolling the table fails), with its box and font size.
const PHONE_CHECK: &str = r##"
const redis = document.getElementById("sku-1-redis");
const row = redis ? redis.closest("tr") : null;
const wrap = document.querySelector("#skus").closest(".table-wrap").getBoundingClientRect();
const left = Math.max(0, wrap.left), right = Math.min(window.innerWidth, wrap.right);
const cells = {};
for (const [name, e] of [
  ["SKU 1's id", row && row.querySelector("th")],
  ["SKU 1's stock in Redis", redis],
  ["SKU 1's stock in MySQL", document.getElementById("sku-1-mysql")],
  ["SKU 1's status badge", document.querySelector("#sku-1-badge .badge")],
]) {
  const r = e ? e.getBoundingClientRect() : null;
  cells[name] = {
    // Half a pixel for layout's rounding.
    onScreen: !!r && r.width > 0 && r.left >= left - 0.5 && r.right <= right + 0.5
      && r.top >= -0.5 && r.bottom <= window.innerHeight + 0.5,
    fontPx: e ? parseFloat(getComputedStyle(e).fontSize) : 0,
    rect: r && [r.left, r.top, r.right, r.bottom],
  };
}
return {
  scrollWidth: document.documentElement.scrollWidth,
  clientWidth: document.documentElement.clientWidth,
  innerWidth: window.innerWidth,
  visible: [left, right, window.innerHeight],
  cells,
};
"##;
