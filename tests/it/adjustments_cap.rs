//! An adjustment never takes a SKU's total past the cap the admin `PUT`
//! enforces (`TOTAL_STOCK_MAX`, 10^12; issue 51): refused as `PUT` refuses
//! such a total, nothing written in either store.

use mysql_async::prelude::Queryable;
use serde_json::json;

use stockd::roles::api::views::TOTAL_STOCK_MAX;

use crate::helpers::TestApp;

/// Units the SKU starts below the cap.
const HEADROOM: i64 = 2;

/// A SKU two units below the cap: `+3` answers 400 `INVALID_REQUEST` with
/// MySQL's total and available, Redis's available and the movements as they
/// were; `+2` (exactly the cap) is applied; `-1` after it too.
#[tokio::test]
async fn an_adjustment_past_the_total_cap_is_refused_and_writes_nothing() {
    let start = TOTAL_STOCK_MAX - HEADROOM;
    let app = TestApp::spawn_with_sku(1, start, 5).await;
    let body = json!({"delta": HEADROOM + 1, "reason": "too many", "adjustment_id": "cap1"});
    let (status, problem) = app.adjust(1, &body).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (400, Some("INVALID_REQUEST")),
        "{problem}"
    );
    assert_eq!(app.mysql_total(1).await, start, "MySQL's total unchanged");
    assert_eq!(app.mysql_available(1).await, Some(start));
    assert_eq!(app.redis_available(1).await, Some(start), "Redis unchanged");
    let mut conn = app.mysql().await;
    let movements: Option<u64> = conn
        .query_first("SELECT COUNT(*) FROM stock_movements WHERE sku_id = 1")
        .await
        .unwrap();
    assert_eq!(movements, Some(1), "only the creation's movement");
    let (status, m) = app
        .adjust(1, &json!({"delta": HEADROOM, "reason": "to the cap"}))
        .await;
    assert_eq!(status, 201, "exactly the cap is allowed: {m}");
    let (status, m) = app.adjust(1, &json!({"delta": -1, "reason": "cut"})).await;
    assert_eq!(status, 201, "{m}");
    assert_eq!(app.mysql_total(1).await, TOTAL_STOCK_MAX - 1);
    assert_eq!(app.redis_available(1).await, Some(TOTAL_STOCK_MAX - 1));
    app.finish_conserved(1).await;
}
