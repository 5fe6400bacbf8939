//! A split SKU through the operations around the sale: a Redis that lost it
//! (warm-up into the pool and the buyers' buckets), a request id reused by a
//! buyer of another bucket, a transfer abandoned between debit and credit,
//! a re-split while no buyer state lives, and a stock adjustment while the
//! buckets sell.

use serde_json::json;

use super::load;
use super::split::{create, finish_reconciled, view, wait_split_drained, DRAIN_WAIT};
use crate::helpers::TestApp;

/// The first `per_bucket` buyers (from `from`) of each of `n` buckets.
fn buyers(from: u64, n: u16, per_bucket: usize) -> Vec<Vec<u64>> {
    load::pick_buyers(from, n, &vec![per_bucket; usize::from(n)])
}

/// Redis loses every key of a split SKU; the warm-up rebuilds it from MySQL:
/// its stock into the pool, each buyer's record and counter into the buyer's
/// bucket. Replays answer 200, the limit still holds, the reconciler is happy.
#[tokio::test]
async fn a_split_sku_lost_by_redis_is_warmed_into_its_buckets() {
    let app = TestApp::spawn().await;
    create(&app, 1, 30, 1, 3).await;
    let by_bucket = buyers(10, 3, 2);
    for (b, users) in by_bucket.iter().enumerate() {
        for user in users {
            let rid = format!("w-{b}-{user}");
            assert_eq!(app.reserve(1, &rid, *user, 1).await.status(), 201, "{rid}");
        }
    }
    wait_split_drained(&app, 1, 6).await;
    app.redis_del(&app.redis_keys().await).await;
    let (status, _) = app.get_json("/v1/skus/1").await;
    assert_eq!(status, 503, "a lost SKU is not loaded, never 0");
    let (status, body) = app.post_json_admin("/v1/admin/skus/1/warmup").await;
    assert_eq!(status, 200, "{body}");
    let split = view(&app, 1).await;
    assert_eq!((split.buckets, split.available), (3, 24), "{split:?}");
    for (b, users) in by_bucket.iter().enumerate() {
        let user = users[0];
        let replay = app.reserve(1, &format!("w-{b}-{user}"), user, 1).await;
        assert_eq!(
            replay.status(),
            200,
            "bucket {b}: a replay after the warm-up"
        );
        let again = app.reserve(1, &format!("again-{b}"), user, 1).await;
        let status = again.status().as_u16();
        let body: serde_json::Value = again.json().await.unwrap();
        assert_eq!(
            (status, body["code"].as_str()),
            (409, Some("LIMIT_EXCEEDED")),
            "bucket {b}: the buyer's counter came back"
        );
    }
    finish_reconciled(app, 1).await;
}

/// Two buyers of different buckets send the same request id: both are
/// admitted in Redis (each bucket checks its own records), MySQL keeps the
/// first, and the second is rejected in Redis with its unit returned.
#[tokio::test]
async fn a_request_id_reused_in_another_bucket_is_rejected_and_its_unit_returned() {
    let app = TestApp::spawn().await;
    create(&app, 1, 10, 5, 3).await;
    let by_bucket = buyers(100, 3, 1);
    let (first, second) = (by_bucket[0][0], by_bucket[1][0]);
    app.reserve_ok(1, "same-id", first, 1).await;
    wait_split_drained(&app, 1, 1).await;
    app.reserve_ok(1, "same-id", second, 1).await;
    app.eventually("the second buyer's unit is back", DRAIN_WAIT, || async {
        view(&app, 1).await.available == 9
    })
    .await;
    wait_split_drained(&app, 1, 1).await;
    let (status, body) = app.get_json("/v1/skus/1/reservations/same-id").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["user_id"], first, "MySQL's row is the first buyer's");
    finish_reconciled(app, 1).await;
}

/// A process died between a transfer's debit and its credit: the pool lost
/// units that no bucket got. The reconciler's pass credits and settles it.
#[tokio::test]
async fn a_transfer_abandoned_after_its_debit_is_finished_by_the_reconciler() {
    let app = TestApp::spawn().await;
    create(&app, 1, 100, 5, 3).await;
    let keys = app.res.redis.keys();
    let home = keys.sku_at("1");
    let pending = keys.transfers_out_at("1");
    let long_ago = stockd::clock::unix_ms() / 1000 - 60;
    app.redis_cmd(&["HINCRBY", &home, "pool", "-7"]).await;
    app.redis_cmd(&["HSET", &pending, "crashed", &format!("2:7:{long_ago}")])
        .await;
    assert_eq!(
        view(&app, 1).await.available,
        93,
        "the 7 units are on the way"
    );
    let report = app.reconcile(true).await;
    assert!(report.healthy(), "{report:?}");
    let split = view(&app, 1).await;
    assert_eq!(split.available, 100, "{split:?}");
    finish_reconciled(app, 1).await;
}

/// With no buyer state, a SKU can be re-split (1 -> 3) and keeps its stock;
/// once a buyer holds a reservation, the count is locked.
#[tokio::test]
async fn a_sku_without_buyers_is_resplit_and_keeps_its_stock() {
    let app = TestApp::spawn_with_sku(1, 50, 2).await;
    let body = json!({"total_stock": 50, "limit_per_user": 2, "buckets": 3});
    let (status, body) = app.put_sku_json(1, &body).await;
    assert_eq!(status, 200, "{body}");
    let split = view(&app, 1).await;
    assert_eq!((split.buckets, split.available), (3, 50), "{split:?}");
    app.reserve_ok(1, "r1", 7, 1).await;
    let body = json!({"total_stock": 50, "limit_per_user": 2, "buckets": 1});
    let (status, code) = app.put_sku_problem(1, &body).await;
    assert_eq!((status, code.as_str()), (409, "BUCKETS_LOCKED"));
    wait_split_drained(&app, 1, 1).await;
    finish_reconciled(app, 1).await;
}

/// An adjustment of a split SKU while its buckets hold leased stock: an
/// addition goes to the pool and buyers of every bucket can take it; a cut
/// first gathers the buckets' stock back; both stores agree once drained.
#[tokio::test]
async fn a_split_sku_is_adjusted_by_a_delta_while_its_buckets_sell() {
    let app = TestApp::spawn().await;
    create(&app, 1, 6, 1, 3).await;
    let by_bucket = buyers(10, 3, 4);
    let mut sold = 0;
    for (b, users) in by_bucket.iter().enumerate() {
        let user = users[0];
        assert_eq!(
            app.reserve(1, &format!("a-{b}"), user, 1).await.status(),
            201
        );
        sold += 1;
    }
    let (status, m) = app.adjust(1, &json!({"delta": 9, "reason": "split"})).await;
    assert_eq!(status, 201, "{m}");
    assert_eq!(view(&app, 1).await.available, 12, "6 - 3 sold + 9");
    for (b, users) in by_bucket.iter().enumerate() {
        for user in &users[1..] {
            let answer = app.reserve(1, &format!("b-{b}-{user}"), *user, 1).await;
            assert_eq!(
                answer.status(),
                201,
                "bucket {b}: the added stock is within reach"
            );
            sold += 1;
        }
    }
    let (status, m) = app
        .adjust(1, &json!({"delta": -2, "reason": "split"}))
        .await;
    assert_eq!(status, 201, "{m}");
    assert_eq!(view(&app, 1).await.available, 12 - 9 - 2);
    let (status, problem) = app
        .adjust(1, &json!({"delta": -5, "reason": "split"}))
        .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("BELOW_RESERVED"))
    );
    wait_split_drained(&app, 1, sold).await;
    assert_eq!(app.mysql_total(1).await, 6 + 9 - 2);
    assert_eq!(app.mysql_available(1).await, Some(6 + 9 - 2 - sold as i64));
    app.assert_conserved(1).await;
    finish_reconciled(app, 1).await;
}
