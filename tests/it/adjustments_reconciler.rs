//! The reconciler never "repairs" an adjustment in progress (issue 51 item
//! 3, the reconciler's half): a pass that looks while a movement is between
//! its two stores leaves Redis alone, and once the movement finishes Redis
//! == MySQL with the delta applied once. Without it a pass read MySQL's
//! committed (old) available against Redis' new one, set Redis back, and
//! the commit then left Redis off by the delta for the rest of the sale.

use mysql_async::prelude::Queryable;
use serde_json::json;
use std::time::Duration;

use crate::adjustments_once::{
    hold_adjustment_key, mysql_stock, now_ms, pending_restock, take_cut_in_redis,
};
use crate::helpers::{poll_until_steady, TestApp};

/// Passes a `REDIS_BEHIND` repair needs (the same drift seen twice).
const PASSES: usize = 2;
/// Longest wait for the adjustment to lock the row and queue on the held key.
const BLOCKED_WAIT: Duration = Duration::from_secs(5);

/// Whether another transaction holds SKU `sku`'s row lock (the adjustment,
/// queued behind the held key with the row locked): a `NOWAIT` lock fails.
async fn row_locked(app: &TestApp, sku: u64) -> bool {
    let mut conn = app.mysql().await;
    conn.query_drop("START TRANSACTION").await.unwrap();
    let probe = conn
        .exec_drop(
            "SELECT sku_id FROM sku_stock WHERE sku_id = ? FOR UPDATE NOWAIT",
            (sku,),
        )
        .await;
    conn.query_drop("ROLLBACK").await.unwrap();
    probe.is_err()
}

/// Repairing reconcile passes; every SKU healthy or drifting, never an error.
async fn passes(app: &TestApp) {
    for _ in 0..PASSES {
        app.reconcile(true).await;
    }
}

/// The interleaving over HTTP, both signs: an adjustment whose
/// movement insert waits on a held key while repairing reconcile passes
/// look, then finishes: 201, Redis == MySQL with the delta once (10 → 15 →
/// 12). Before the fix Redis had moved before the insert, the passes set it
/// back, and the commit left Redis at 10 against MySQL's 15.
#[tokio::test]
async fn reconcile_passes_during_an_adjustment_leave_it_applied_once_in_both_stores() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    for (delta, id, after) in [(5, "r1", 15), (-3, "r2", 12)] {
        let body = json!({"delta": delta, "reason": "late delivery", "adjustment_id": id});
        let mut holder = hold_adjustment_key(&app, 1, id).await;
        let look = async {
            let waits = poll_until_steady(BLOCKED_WAIT, || row_locked(&app, 1)).await;
            passes(&app).await;
            holder.query_drop("ROLLBACK").await.unwrap();
            waits
        };
        let ((status, movement), waited) = tokio::join!(app.adjust(1, &body), look);
        assert!(waited, "the adjustment never queued on the held key");
        assert_eq!(status, 201, "{movement}");
        assert_eq!(
            (app.redis_available(1).await, mysql_stock(&app, 1).await),
            (Some(after), (after, after)),
            "the delta once in both stores ({id})"
        );
        let report = app.reconcile(true).await;
        assert!(report.healthy(), "{report:?}");
    }
    app.finish_conserved(1).await;
}

/// A cut Redis took whose transaction holds the row lock, not committed yet
/// (made by hand as `adjust` makes it: stock and movement written, the cut
/// recorded under its step): repairing passes leave Redis at 8 although
/// MySQL's committed available is 10; then the commit and the settle, and
/// both stores say 8.
#[tokio::test]
async fn a_cut_taken_in_redis_and_not_committed_is_not_repaired() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let sku = TestApp::sku(1);
    let mut tx = app.mysql().await;
    tx.query_drop("START TRANSACTION").await.unwrap();
    tx.query_drop("SELECT * FROM sku_stock WHERE sku_id = 1 FOR UPDATE")
        .await
        .unwrap();
    tx.query_drop("UPDATE sku_stock SET total_stock = 8, available_stock = 8 WHERE sku_id = 1")
        .await
        .unwrap();
    tx.exec_drop(
        "INSERT INTO stock_movements (sku_id, kind, delta, total_before, total_after,
           available_before, available_after, reason, actor, created_at_ms, redis_op,
           redis_pending)
         VALUES (1, 'adjustment', -2, 10, 8, 10, 8, 'damaged', 'test', ?, 'held-cut', 0)",
        (now_ms(),),
    )
    .await
    .unwrap();
    let taken = take_cut_in_redis(&app, 1, "held-cut", -2, 8).await;
    assert!(taken.is_ok(), "{taken:?}");
    passes(&app).await;
    assert_eq!(
        app.redis_available(1).await,
        Some(8),
        "a cut in progress is not repaired"
    );
    tx.query_drop("COMMIT").await.unwrap();
    let settled =
        stockd::ops::stock_step::settle_cut(&app.res.db, app.res.redis.skus(), sku, "held-cut")
            .await
            .unwrap();
    assert_eq!(settled, stockd::redis::Settled::Kept);
    assert_eq!(
        (app.redis_available(1).await, mysql_stock(&app, 1).await),
        (Some(8), (8, 8))
    );
    let report = app.reconcile(true).await;
    assert!(report.healthy(), "{report:?}");
    app.finish_conserved(1).await;
}

/// A restock committed in MySQL whose Redis step has not run yet (made by
/// hand, fresh: the sweep leaves it to its caller): repairing passes leave
/// Redis at 10, the retry of its `adjustment_id` finishes it, and both
/// stores say 15. A repair would have set Redis to 15 and the step then to 20.
#[tokio::test]
async fn a_restock_committed_and_not_yet_in_redis_is_not_repaired() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    pending_restock(&app, "q1", now_ms()).await;
    passes(&app).await;
    assert_eq!(
        app.redis_available(1).await,
        Some(10),
        "a restock in progress is not repaired"
    );
    let body = json!({"delta": 5, "reason": "late", "adjustment_id": "q1"});
    let (status, _) = app.adjust(1, &body).await;
    assert_eq!(status, 200, "the retry replays and finishes the step");
    assert_eq!(
        (app.redis_available(1).await, mysql_stock(&app, 1).await),
        (Some(15), (15, 15))
    );
    let report = app.reconcile(true).await;
    assert!(report.healthy(), "{report:?}");
    app.finish_conserved(1).await;
}
