//! An adjustment (and a restock `PUT`) moves both stores exactly once
//! whatever fails and however often the caller retries (issue 51 items 1
//! and 2; docs/operations.md, "Adjusting stock during a sale"): a call that
//! timed out leaves the stores agreeing, its retry moves both once, a step
//! the caller left unfinished is finished by the reconciler's sweep, and a
//! SKU Redis lost is loaded by warm-up only (with its buyer state).

use std::sync::Arc;

use mysql_async::prelude::Queryable;
use serde_json::json;

use crate::helpers::{TestApp, TestOptions};

/// The operation bound of production (`mysql.query_timeout_ms`), which the
/// tried case of the issue ran into.
const BOUND_MS: u64 = 3_000;

/// A fresh app whose MySQL operations are bounded as in production.
async fn spawn_bounded() -> TestApp {
    let tweak: crate::helpers::SettingsTweak =
        Arc::new(|s: &mut stockd::config::Settings| s.mysql.query_timeout_ms = BOUND_MS);
    let app = TestApp::with(TestOptions {
        tweak: Some(tweak),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    app
}

/// MySQL's (total, available) of `sku`.
pub(crate) async fn mysql_stock(app: &TestApp, sku: u64) -> (i64, i64) {
    (
        app.mysql_total(sku).await,
        app.mysql_available(sku).await.unwrap(),
    )
}

/// Holds the unique key `(sku, adjustment_id)` of `stock_movements` in an
/// open transaction, as a concurrent writer would; roll it back to let go.
pub(crate) async fn hold_adjustment_key(app: &TestApp, sku: u64, id: &str) -> mysql_async::Conn {
    let mut conn = app.mysql().await;
    conn.query_drop("START TRANSACTION").await.unwrap();
    conn.exec_drop(
        "INSERT INTO stock_movements (sku_id, kind, delta, total_before, total_after,
           available_before, available_after, actor, adjustment_id, created_at_ms)
         VALUES (?, 'adjustment', 0, 0, 0, 0, 0, 'test', ?, 0)",
        (sku, id),
    )
    .await
    .unwrap();
    conn
}

/// The tried case, both signs: the movement insert waits past the
/// bound (503), neither store moved; the retry of the same id moves both
/// once (10 → 15, then 15 → 12), never twice.
#[tokio::test]
async fn an_adjustment_that_timed_out_moved_neither_store_and_its_retry_moves_both_once() {
    let app = spawn_bounded().await;
    for (delta, id, after) in [(5, "a1", 15), (-3, "c1", 12)] {
        let body = json!({"delta": delta, "reason": "late delivery", "adjustment_id": id});
        let mut holder = hold_adjustment_key(&app, 1, id).await;
        let (status, problem) = app.adjust(1, &body).await;
        holder.query_drop("ROLLBACK").await.unwrap();
        assert_eq!(status, 503, "{problem}");
        let before = after - delta;
        assert_eq!(
            (app.redis_available(1).await, mysql_stock(&app, 1).await),
            (Some(before), (before, before)),
            "a 503 moved neither store ({id})"
        );
        let (status, movement) = app.adjust(1, &body).await;
        assert_eq!(status, 201, "{movement}");
        let (status, _) = app.adjust(1, &body).await;
        assert_eq!(status, 200, "a replay");
        assert_eq!(
            (app.redis_available(1).await, mysql_stock(&app, 1).await),
            (Some(after), (after, after)),
            "both moved once ({id})"
        );
    }
    app.finish_conserved(1).await;
}

/// Redis lost the SKU: an adjustment and a `PUT` answer 503 and change
/// nothing until warm-up loaded it with its buyer state; then the retry of
/// a reservation taken before the loss is a replay (200), not a new one.
#[tokio::test]
async fn a_sku_redis_lost_is_adjusted_only_after_the_warm_up_and_replays_survive() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_ok(1, "r1", 7, 2).await;
    app.wait_drained(1).await;
    let keys = app.redis_keys().await;
    app.redis_del(&keys).await;
    let body = json!({"delta": 1, "reason": "found one", "adjustment_id": "b1"});
    let (status, problem) = app.adjust(1, &body).await;
    let put = app.put_sku(1, 12, 5).await.status().as_u16();
    let retried = app.reserve(1, "r1", 7, 2).await.status().as_u16();
    assert_eq!(
        (status, put, retried),
        (503, 503, 503),
        "not loaded: {problem}"
    );
    assert_eq!(mysql_stock(&app, 1).await, (10, 8), "nothing moved");
    let (status, warmed) = app.post_json_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!((status, warmed["available"].as_i64()), (200, Some(8)));
    let replay = app.reserve(1, "r1", 7, 2).await;
    assert_eq!(replay.status(), 200, "the retry is a replay");
    assert_eq!(replay.headers()["Idempotent-Replayed"], "true");
    let (status, movement) = app.adjust(1, &body).await;
    assert_eq!(status, 201, "{movement}");
    assert_eq!(app.redis_available(1).await, Some(9));
    assert_eq!(mysql_stock(&app, 1).await, (11, 9));
    app.finish_conserved(1).await;
}

/// A restock of SKU 1 (10 → 15) committed in MySQL whose Redis step has not
/// run: the stock moved and the movement `adjustment_id` marked pending
/// (`op-<id>`), created at `created_at_ms`. Redis still says 10.
pub(crate) async fn pending_restock(app: &TestApp, adjustment_id: &str, created_at_ms: u64) {
    let mut conn = app.mysql().await;
    conn.query_drop("UPDATE sku_stock SET total_stock = 15, available_stock = 15 WHERE sku_id = 1")
        .await
        .unwrap();
    conn.exec_drop(
        "INSERT INTO stock_movements (sku_id, kind, delta, total_before, total_after,
           available_before, available_after, reason, actor, adjustment_id, created_at_ms,
           redis_op, redis_pending)
         VALUES (1, 'adjustment', 5, 10, 15, 10, 15, 'late', 'test', ?, ?, ?, 1)",
        (adjustment_id, created_at_ms, format!("op-{adjustment_id}")),
    )
    .await
    .unwrap();
}

/// Takes a cut in Redis as an adjustment's Redis step does (recorded in the
/// SKU's cuts under `op`), without its MySQL side: what a caller that died
/// between the two stores leaves. `total` is the SKU's total after the cut.
pub(crate) async fn take_cut_in_redis(
    app: &TestApp,
    sku: u64,
    op: &str,
    delta: i64,
    total: u64,
) -> Result<stockd::redis::LoadOutcome, stockd::redis::RedisError> {
    let sku = TestApp::sku(sku);
    let layout = app.res.redis.buckets().read_layout(sku).await.unwrap();
    let step = stockd::redis::Step {
        op,
        mode: stockd::redis::LoadMode::Move,
        movement_id: 0,
        record_cut: true,
    };
    let limit_per_user = 5;
    app.res
        .redis
        .skus()
        .load_sku(&layout, delta, total as i64, limit_per_user, total, step)
        .await
}

/// Milliseconds since the epoch, as stockd stamps its movements.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Older than any operation bound: what the sweep takes as left by its caller.
const LEFT_MS_AGO: u64 = 600_000;

/// A restock committed in MySQL whose caller went away before its Redis
/// step (made by hand: the stock moved and the movement marked pending) is
/// applied by the reconciler's sweep, once; the retry of its id is a replay
/// that moves nothing.
#[tokio::test]
async fn a_restock_its_caller_left_is_applied_once_by_the_sweep() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    pending_restock(&app, "p1", now_ms() - LEFT_MS_AGO).await;
    assert_eq!(app.redis_available(1).await, Some(10));
    app.reconcile(true).await;
    assert_eq!(app.redis_available(1).await, Some(15), "swept");
    let report = app.reconcile(true).await;
    assert_eq!(app.redis_available(1).await, Some(15), "once");
    assert!(report.healthy(), "{report:?}");
    let body = json!({"delta": 5, "reason": "late", "adjustment_id": "p1"});
    let (status, _) = app.adjust(1, &body).await;
    assert_eq!(status, 200, "a replay");
    assert_eq!(app.redis_available(1).await, Some(15));
    app.finish_conserved(1).await;
}

/// A cut Redis took whose transaction never committed (its caller died) is
/// given back by the sweep; one whose movement committed is kept.
#[tokio::test]
async fn a_cut_its_caller_left_is_given_back_or_kept_by_what_mysql_committed() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let (status, _) = app
        .adjust(
            1,
            &json!({"delta": -2, "reason": "damaged", "adjustment_id": "k1"}),
        )
        .await;
    assert_eq!(status, 201);
    let sku = TestApp::sku(1);
    let taken = take_cut_in_redis(&app, 1, "lost-cut", -3, 5).await;
    assert!(
        matches!(
            taken,
            Ok(stockd::redis::LoadOutcome::Loaded { available: 5 })
        ),
        "{taken:?}"
    );
    let mut conn = app.mysql().await;
    let kept: String = conn
        .query_first("SELECT redis_op FROM stock_movements WHERE adjustment_id = 'k1'")
        .await
        .unwrap()
        .unwrap();
    let cuts = app.res.redis.keys().cuts(sku);
    let left = (now_ms() - LEFT_MS_AGO).to_string();
    for (op, units) in [("lost-cut", "3"), (kept.as_str(), "2")] {
        app.redis_cmd(&["HSET", &cuts, op, &format!("{units}:{left}")])
            .await;
    }
    app.reconcile(true).await;
    assert_eq!(
        app.redis_available(1).await,
        Some(8),
        "the lost cut given back, not the kept one"
    );
    assert_eq!(mysql_stock(&app, 1).await, (8, 8));
    let report = app.reconcile(true).await;
    assert!(report.healthy(), "{report:?}");
    assert_eq!(app.redis_available(1).await, Some(8));
    app.finish_conserved(1).await;
}

/// Warm-up never overwrites a movement of stock newer than its reading of
/// MySQL: a warm-up write from a reading taken before an adjustment reached
/// Redis changes nothing, and a cut taken and not yet settled refuses a
/// warm-up (409) until it is.
#[tokio::test]
async fn a_warm_up_never_overwrites_a_newer_movement_in_redis() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let (status, m) = app
        .adjust(
            1,
            &json!({"delta": 5, "reason": "late", "adjustment_id": "w1"}),
        )
        .await;
    assert_eq!(status, 201, "{m}");
    let sku = TestApp::sku(1);
    let layout = app.res.redis.buckets().read_layout(sku).await.unwrap();
    let read_before = m["id"].as_u64().unwrap() - 1;
    // A warm-up that read MySQL (10 units) before the adjustment landed.
    let _ = app
        .res
        .redis
        .drift()
        .warm(&layout, 10, 10, 5, 0, read_before)
        .await
        .unwrap();
    assert_eq!(app.redis_available(1).await, Some(15), "not overwritten");
    let step = stockd::redis::Step {
        op: "unsettled-cut",
        mode: stockd::redis::LoadMode::Move,
        movement_id: 0,
        record_cut: true,
    };
    let taken = app
        .res
        .redis
        .skus()
        .load_sku(&layout, -2, 13, 5, 13, step)
        .await;
    assert!(taken.is_ok(), "{taken:?}");
    let (status, body) = app.post_json_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("CONFLICT")),
        "{body}"
    );
    assert_eq!(
        app.redis_available(1).await,
        Some(13),
        "the cut is still taken"
    );
    let cuts = app.res.redis.keys().cuts(sku);
    let left = (now_ms() - LEFT_MS_AGO).to_string();
    app.redis_cmd(&["HSET", &cuts, "unsettled-cut", &format!("2:{left}")])
        .await;
    app.reconcile(true).await;
    assert_eq!(app.redis_available(1).await, Some(15), "given back");
    let (status, body) = app.post_json_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(
        (status, body["available"].as_i64()),
        (200, Some(15)),
        "{body}"
    );
    app.finish_conserved(1).await;
}
