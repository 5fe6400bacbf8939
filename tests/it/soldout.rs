//! The sold-out short-circuit across api nodes (contract §7). Two api instances in
//! one test share Redis, MySQL and RabbitMQ, as two nodes of a fleet would.
//!
//! "No script call" is observed on a private redis-server, whose
//! `INFO commandstats` counts only this test's commands (the shared Redis is
//! busy with the tests running in parallel).

use std::time::{Duration, Instant};

use deadpool_redis::redis;

use crate::helpers::{PrivateRedis, TestApp, TestOptions};

const FLAG_WITHIN: Duration = Duration::from_millis(100);

/// A sells the last unit → B refuses locally within 100 ms; a cancel on A → B
/// accepts again within 100 ms.
#[tokio::test]
async fn a_sellout_on_one_node_short_circuits_the_other_and_a_cancel_reopens_it() {
    let private = PrivateRedis::start().await;
    let mut app = TestApp::with(TestOptions {
        redis_url: Some(private.url.clone()),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 1, 1).await;
    let (b_base, b) = app.spawn_api();
    let b_board = b.soldout.clone().unwrap();
    app.wait_subscribers(2).await; // A and B subscribed
    let a_base = app.base.clone();
    assert_eq!(app.reserve_at(&a_base, 1, "last", 1).await.0, 201);
    let sold = Instant::now();
    while !b_board.is_flagged(TestApp::sku(1)) {
        assert!(sold.elapsed() < FLAG_WITHIN, "B not flagged within 100 ms");
        // About time itself: the flag must turn within FLAG_WITHIN; a 5 ms
        // poll measures when it did.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let before = b_board.short_circuited();
    let scripts_before = private.script_calls().await;
    for i in 0..20 {
        let (status, body) = app
            .reserve_at(&b_base, 1, &format!("late{i}"), 100 + i)
            .await;
        assert_eq!((status, body["code"].as_str()), (409, Some("SOLD_OUT")));
    }
    assert_eq!(
        b_board.short_circuited() - before,
        20,
        "every refusal answered locally"
    );
    assert_eq!(
        private.script_calls().await,
        scripts_before,
        "no script call reached Redis while B refused"
    );
    // The winner's replay on B still gets its stored answer.
    let (status, body) = app.reserve_at(&b_base, 1, "last", 1).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("RESERVED")));
    let (_, sku) = app.get_json("/v1/skus/1").await;
    assert_eq!(sku["sold_out"], true);

    let (status, _) = app.cancel(1, "last").await;
    assert_eq!(status, 200);
    let reopened = Instant::now();
    while b_board.is_flagged(TestApp::sku(1)) {
        assert!(
            reopened.elapsed() < FLAG_WITHIN,
            "B still flagged after 100 ms"
        );
        // About time itself: as above, measuring the flag's turn.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(app.reserve_at(&b_base, 1, "again", 2).await.0, 201);
    app.wait_ledger_rows(2).await;
    app.finish_drained_and_conserved(1).await;
}

/// Subscribers killed right before the sellout: nothing is ever wrongly
/// accepted, and B's flag is right again within the TTL.
#[tokio::test]
async fn killed_subscribers_never_cause_a_wrong_acceptance() {
    let mut app = TestApp::spawn_with_sku(1, 3, 1).await;
    let (b_base, b) = app.spawn_api();
    let b_board = b.soldout.clone().unwrap();
    app.wait_subscribers(2).await; // A and B subscribed
    for mut node in app.redis_nodes().await {
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut node)
            .await
            .unwrap();
    }
    let mut accepted = 0;
    for i in 0..3u64 {
        let (status, _) = app
            .reserve_at(&app.base.clone(), 1, &format!("w{i}"), i + 1)
            .await;
        accepted += u32::from(status == 201);
    }
    assert_eq!(accepted, 3);
    for i in 0..30u64 {
        let base = if i % 2 == 0 { &b_base } else { &app.base };
        let (status, _) = app.reserve_at(base, 1, &format!("x{i}"), 100 + i).await;
        assert_eq!(status, 409, "never accepted after the sellout");
    }
    let ttl = Duration::from_millis(app.res.settings.soldout.flag_ttl_ms);
    let start = Instant::now();
    app.eventually(
        "B flagged again",
        ttl + Duration::from_millis(500),
        || async { b_board.is_flagged(TestApp::sku(1)) },
    )
    .await;
    assert!(start.elapsed() <= ttl + Duration::from_millis(500));
    app.wait_ledger_rows(3).await;
    app.finish_drained_and_conserved(1).await;
}

/// A restarted api node starts with the right flags, from the durable markers.
#[tokio::test]
async fn a_restarted_node_loads_its_flags_from_the_durable_markers() {
    let mut app = TestApp::spawn_with_sku(1, 1, 1).await;
    app.create_sku(2, 5, 1).await;
    app.reserve_ok(1, "only", 1, 1).await;
    let (_, fresh) = app.spawn_api();
    let board = fresh.soldout.clone().unwrap();
    app.eventually(
        "new node flagged sku 1 at start",
        Duration::from_secs(2),
        || async { board.is_flagged(TestApp::sku(1)) },
    )
    .await;
    assert!(!board.is_flagged(TestApp::sku(2)));
    app.wait_ledger_rows(1).await;
    app.finish_drained(1).await;
}

/// The board reads a sold-out SKU's winners in pages (SSCAN), so a set of
/// thousands of ids comes back whole, each once, without one blocking
/// SMEMBERS; more than the cap is `None`.
#[tokio::test]
async fn the_winners_of_a_sold_out_sku_are_read_whole_in_pages() {
    const WINNERS: usize = 2_500;
    let app = TestApp::with(TestOptions::default()).await;
    app.create_sku(1, 10, 10).await;
    let sku = TestApp::sku(1);
    let key = app.res.redis.keys().winners(sku);
    let ids: Vec<String> = (0..WINNERS).map(|n| format!("w-{n}")).collect();
    let mut conn = app.redis_conn().await;
    for chunk in ids.chunks(500) {
        let _: () = redis::cmd("SADD")
            .arg(&key)
            .arg(chunk)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let read = app.res.redis.skus().winners(sku, 0, 100_000).await.unwrap();
    let read = read.expect("under the cap");
    assert_eq!(read.len(), WINNERS);
    assert!(ids.iter().all(|id| read.contains(id)));
    let capped = app
        .res
        .redis
        .skus()
        .winners(sku, 0, WINNERS - 1)
        .await
        .unwrap();
    assert_eq!(capped, None, "more winners than the cap");
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    app.cleanup().await;
}
