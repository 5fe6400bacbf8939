//! A split SKU's shape: N locked while buyers live and bounded by the
//! maximum, its view listing every bucket, a restock adding to it, and in a
//! cluster one primary per bucket.

use deadpool_redis::redis;
use deadpool_redis::redis::FromRedisValue;
use serde_json::json;

use super::load;
use super::split::{buckets_max, create, split_of, view, wait_split_drained, Split};
use super::{BUCKETS, SALE_BUYERS_FROM};
use crate::helpers::TestApp;

/// Changing N while the SKU has buyer state in Redis is 409 BUCKETS_LOCKED
/// and changes nothing (not even a restock sent along); an unchanged or
/// absent N is fine; N outside 1..=`buckets.max` is 400 and writes nothing.
#[tokio::test]
async fn buckets_are_locked_while_buyers_live_and_bounded_by_the_maximum() {
    let app = TestApp::spawn().await;
    let max = buckets_max(&app);
    create(&app, 1, 100, 5, BUCKETS).await;
    let buyer = load::pick_buyers(SALE_BUYERS_FROM, BUCKETS, &[0, 1, 0])[1][0];
    app.reserve_ok(1, "live", buyer, 1).await;
    for (n, total) in [(2, 100), (1, 100), (4, 150)] {
        let body = json!({"total_stock": total, "limit_per_user": 5, "buckets": n});
        let (status, code) = app.put_sku_problem(1, &body).await;
        assert_eq!((status, code.as_str()), (409, "BUCKETS_LOCKED"), "N {n}");
    }
    // A SKU created with N = 1 (today's) and a live buyer is locked too.
    app.create_sku(2, 10, 1).await;
    app.reserve_ok(2, "live2", buyer, 1).await;
    let body = json!({"total_stock": 10, "limit_per_user": 1, "buckets": BUCKETS});
    let (status, code) = app.put_sku_problem(2, &body).await;
    assert_eq!((status, code.as_str()), (409, "BUCKETS_LOCKED"));
    for bad in [json!(0), json!(max + 1), json!(-1), json!("3"), json!(1.5)] {
        for sku in [1, 3] {
            let body = json!({"total_stock": 100, "limit_per_user": 5, "buckets": bad});
            let (status, code) = app.put_sku_problem(sku, &body).await;
            assert_eq!((status, code.as_str()), (400, "INVALID_REQUEST"), "{bad}");
        }
    }
    assert_eq!(app.get_json("/v1/skus/3").await.0, 404, "nothing written");
    assert_eq!(app.mysql_available(3).await, None);
    let one = view(&app, 1).await;
    assert_eq!((one.buckets, one.available), (3, 99), "unchanged: {one:?}");
    assert_eq!(view(&app, 2).await.buckets, 1, "unchanged");
    assert_eq!(app.mysql_total(1).await, 100, "the restock sent along");
    // Same N, or none, is no change: the restock goes through.
    let body = json!({"total_stock": 110, "limit_per_user": 5, "buckets": 3});
    let (status, same) = app.put_sku_json(1, &body).await;
    assert_eq!((status, split_of(&same).available), (200, 109), "{same}");
    let body = json!({"total_stock": 120, "limit_per_user": 5});
    let (status, kept) = app.put_sku_json(1, &body).await;
    assert_eq!(status, 200, "{kept}");
    assert_eq!(
        (split_of(&kept).buckets, split_of(&kept).available),
        (3, 119)
    );
    // The maximum itself is in range.
    create(&app, 4, 50, 1, max).await;
    assert_eq!(view(&app, 4).await.stock.len() as u64, u64::from(max));
    wait_split_drained(&app, 1, 1).await;
    app.finish_drained(2).await;
}

/// A SKU created with N = 3 lists three buckets whose figures add up to its
/// stock; a restock adds to it; an N = 1 SKU's view has no split fields. In
/// a cluster the three buckets' tags land on three different primaries.
#[tokio::test]
async fn a_split_sku_shows_its_buckets_and_a_restock_adds_to_its_stock() {
    let app = TestApp::spawn().await;
    let body = json!({"total_stock": 300, "limit_per_user": 2, "buckets": 3});
    let (status, created) = app.put_sku_json(1, &body).await;
    assert_eq!(status, 200, "{created}");
    let answered = split_of(&created);
    assert_eq!(
        (answered.buckets, answered.available),
        (3, 300),
        "{created}"
    );
    let before = view(&app, 1).await;
    assert_split_adds_up(&before, 300, "created");
    let body = json!({"total_stock": 450, "limit_per_user": 2});
    let (status, restocked) = app.put_sku_json(1, &body).await;
    assert_eq!(
        (status, split_of(&restocked).available),
        (200, 450),
        "{restocked}"
    );
    let after = view(&app, 1).await;
    assert_split_adds_up(&after, 450, "restocked");
    assert!(after.pool >= before.pool, "{before:?} -> {after:?}");
    // One buyer per bucket buys one unit: 447 left, still adding up.
    let buyers = load::pick_buyers(SALE_BUYERS_FROM, BUCKETS, &[1, 1, 1]);
    for (b, users) in buyers.iter().enumerate() {
        let rid = format!("one-{b}");
        assert_eq!(
            app.reserve(1, &rid, users[0], 1).await.status(),
            201,
            "bucket {b}"
        );
    }
    assert_split_adds_up(&view(&app, 1).await, 447, "after three buyers");
    assert_bucket_tags(&app, 1, BUCKETS).await;
    app.create_sku(2, 7, 1).await;
    let plain = view(&app, 2).await;
    assert_eq!(
        (plain.buckets, plain.pool, plain.available),
        (1, 0, 7),
        "{plain:?}"
    );
    assert_eq!(plain.stock.len(), 1, "{plain:?}");
    assert_eq!((plain.stock[0].bucket, plain.stock[0].available), (0, 7));
    wait_split_drained(&app, 1, 3).await;
    app.cleanup().await;
}

/// Idle (no transfer in flight): `available` is the pool plus every bucket,
/// one entry per bucket in order, nothing sold out.
fn assert_split_adds_up(split: &Split, available: i64, when: &str) {
    assert_eq!(
        (split.buckets, split.available, split.sold_out),
        (u64::from(BUCKETS), available, false),
        "{when}: {split:?}"
    );
    let in_buckets: i64 = split.stock.iter().map(|b| b.available).sum();
    assert_eq!(split.pool + in_buckets, available, "{when}: {split:?}");
    let ids: Vec<u64> = split.stock.iter().map(|b| b.bucket).collect();
    assert_eq!(ids, (0..u64::from(BUCKETS)).collect::<Vec<_>>(), "{when}");
    assert!(split.stock.iter().all(|b| !b.sold_out), "{when}: {split:?}");
}

/// The SKU id (bucket 0) and the home hash's `tags` (buckets 1..) name one
/// hash tag per bucket, all different; in a cluster their slots belong to as
/// many different primaries.
async fn assert_bucket_tags(app: &TestApp, sku: u64, n: u16) {
    let home = app.res.redis.keys().sku(TestApp::sku(sku));
    let mut conn = app.redis_conn().await;
    let tags: Option<String> = redis::cmd("HGET")
        .arg(&home)
        .arg("tags")
        .query_async(&mut conn)
        .await
        .unwrap();
    let tags = tags.expect("home hash field `tags`");
    // Bucket 0's tag is the SKU id (today's keys); `tags` lists buckets 1...
    let home_tag = sku.to_string();
    let mut list: Vec<&str> = vec![home_tag.as_str()];
    list.extend(tags.split(','));
    assert_eq!(list.len(), usize::from(n), "tags {tags}");
    let mut distinct = list.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), list.len(), "tags {tags}");
    if app.direct_settings.redis.mode != stockd::config::RedisMode::Cluster {
        return;
    }
    let mut node = app.redis_nodes().await.remove(0);
    // Each range: start, end, then the primary ([ip, port, id]) and replicas.
    let ranges: Vec<Vec<redis::Value>> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut node)
        .await
        .unwrap();
    let int = |v: &redis::Value| i64::from_redis_value_ref(v).unwrap();
    let mut owners = Vec::new();
    for tag in &list {
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(tag)
            .query_async(&mut node)
            .await
            .unwrap();
        let range = ranges
            .iter()
            .find(|r| (int(&r[0])..=int(&r[1])).contains(&slot))
            .expect("slot covered");
        owners.push(format!("{:?}", range[2]));
    }
    let mut primaries = owners.clone();
    primaries.sort_unstable();
    primaries.dedup();
    assert_eq!(
        primaries.len(),
        list.len(),
        "tags {tags}: primaries {owners:?}"
    );
}

/// A finish routed by a bucket layout cached before a re-split that shrank
/// the SKU (another api node's lifecycle or sweep, say): the buyer's old
/// bucket hash is gone, and the reservation held since in its new bucket
/// must still be found and released — not a tombstone written in the gone
/// bucket while the hold stays (issue 50 D7, `finish.lua`).
#[tokio::test]
async fn a_finish_routed_by_a_layout_that_shrank_finds_the_held_reservation() {
    let app = TestApp::spawn().await;
    let sku = TestApp::sku(1);
    let put = |n: u16| json!({"total_stock": 40, "limit_per_user": 5, "buckets": n});
    let (status, body) = app.put_sku_json(1, &put(4)).await;
    assert_eq!(status, 200, "{body}");
    let stale = stockd::redis::RedisStore::new(&app.res.settings.redis, 60).unwrap();
    let old = stale.buckets().layout(sku).await.unwrap();
    assert_eq!(old.n(), 4);
    let user = (1..)
        .find(|&u| old.bucket_of(stockd::domain::UserId::new(u).unwrap()) == 3)
        .unwrap();
    let (status, body) = app.put_sku_json(1, &put(2)).await;
    assert_eq!(status, 200, "{body}");
    let rid = stockd::domain::RequestId::parse("shrunk").unwrap();
    let buyer = stockd::domain::UserId::new(user).unwrap();
    // The store's own path (the api's board has nothing to do with this).
    let taken = app
        .res
        .redis
        .reservations()
        .reserve(sku, &rid, buyer, 2, &stockd::domain::Requester::Anyone)
        .await;
    assert!(
        matches!(taken, Ok(stockd::domain::ReserveOutcome::Reserved { .. })),
        "{taken:?}"
    );
    assert_eq!(view(&app, 1).await.available, 38);

    let finished = stale
        .reservations()
        .finish(
            sku,
            &rid,
            buyer,
            2,
            stockd::domain::ReservationStatus::Released,
            stockd::redis::reservation::FinishEffect::Plain,
        )
        .await;
    assert!(
        matches!(
            finished,
            Ok(stockd::redis::reservation::FinishOutcome::Applied)
        ),
        "the stale node's finish finds the reservation: {finished:?}"
    );
    assert_eq!(view(&app, 1).await.available, 40);
    app.cleanup().await;
}
