//! Batched order admission (`redis/orders.rs`, `order.lua`, the lanes of
//! `redis/lanes.rs`): several orders decided by one order script call must
//! answer what one call each, in the same order, would. The batch-specific
//! cases are driven with batches of a known make-up (`Orders::decide_batch`,
//! one call, no lane); the lane itself by concurrent `Orders::reserve` calls
//! on a Redis of the test's own, whose script count is the test's alone.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;
use futures_util::StreamExt;

use stockd::domain::{RequestId, Requester, UserId};
use stockd::redis::{Keys, LineRefusal, OrderAsk, OrderOutcome, RedisError};

use crate::helpers::{PrivateRedis, TestApp, TestOptions};

const STANDALONE_REDIS: &str = "redis://127.0.0.1:6379";

/// Only the script is under test: the relay leaves the outbox entries be,
/// and the test drops them before cleanup.
fn options(redis_url: &str) -> TestOptions {
    TestOptions {
        redis_url: Some(redis_url.into()),
        tweak: Some(Arc::new(|s| s.relay.idle_ms = 3_600_000)),
        ..TestOptions::default()
    }
}

fn ask(order_id: &str, buyer: u64, parts: &[(u64, u32)]) -> OrderAsk {
    OrderAsk {
        order_id: RequestId::parse(order_id).unwrap(),
        user_id: UserId::new(buyer).unwrap(),
        lines: TestApp::order_lines(parts),
        requester: String::new(),
        carries_pass: false,
    }
}

async fn decide(app: &TestApp, asks: &[OrderAsk]) -> Vec<Result<OrderOutcome, RedisError>> {
    app.res
        .redis
        .orders()
        .decide_batch(asks)
        .await
        .expect("the call itself succeeds")
}

fn is_held(outcome: &Result<OrderOutcome, RedisError>) -> bool {
    matches!(outcome, Ok(OrderOutcome::Reserved { .. }))
}

/// Whether Redis holds a line record of `order_id` on `sku`.
async fn line_held(app: &TestApp, sku: u64, order_id: &str) -> bool {
    app.res
        .redis
        .reservations()
        .reservation(TestApp::sku(sku), &RequestId::parse(order_id).unwrap())
        .await
        .unwrap()
        .is_some()
}

/// The entries are the test's, not the pipeline's: removed before cleanup.
async fn drop_order_outboxes(app: &TestApp) {
    for shard in 0..stockd::redis::keys::ORDER_SHARDS {
        let key = app.res.redis.keys().order_outbox(shard);
        app.redis_cmd(&["DEL", &key]).await;
    }
}

/// Two orders of one buyer in one call meet a limit of one per SKU: the
/// second is refused on the line the first already holds, another buyer is
/// not, and each SKU's stock is taken once per held line.
#[tokio::test]
async fn two_orders_of_one_buyer_in_one_call_meet_the_limit() {
    let app = TestApp::with(options(STANDALONE_REDIS)).await;
    app.create_sku(1, 10, 1).await;
    app.create_sku(2, 10, 1).await;
    let out = decide(
        &app,
        &[
            ask("l-1", 7, &[(1, 1), (2, 1)]),
            ask("l-2", 7, &[(2, 1)]),
            ask("l-3", 8, &[(1, 1), (2, 1)]),
        ],
    )
    .await;
    assert!(is_held(&out[0]), "{out:?}");
    assert_eq!(
        out[1].as_ref().unwrap(),
        &OrderOutcome::Refused {
            sku_id: TestApp::sku(2),
            why: LineRefusal::LimitExceeded {
                bought: 1,
                limit: 1
            }
        }
    );
    assert!(is_held(&out[2]), "another buyer: {out:?}");
    assert_eq!(app.redis_available(1).await, Some(8));
    assert_eq!(app.redis_available(2).await, Some(8));
    assert!(
        !line_held(&app, 2, "l-2").await,
        "the refused order holds nothing"
    );
    drop_order_outboxes(&app).await;
    app.cleanup().await;
}

/// The same order twice in one call is held once and then replayed with the
/// stored times; the same id with other lines is a mismatch. Each answer
/// reports the stock as the orders before it left it.
#[tokio::test]
async fn an_order_and_its_replay_in_one_call_hold_it_once() {
    let app = TestApp::with(options(STANDALONE_REDIS)).await;
    app.create_sku(1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    let out = decide(
        &app,
        &[
            ask("r-1", 7, &[(1, 2), (2, 1)]),
            ask("r-1", 7, &[(1, 2), (2, 1)]),
            ask("r-1", 7, &[(1, 3)]),
            ask("r-2", 8, &[(1, 1)]),
        ],
    )
    .await;
    let Ok(OrderOutcome::Reserved {
        created_ms,
        expires_ms,
        lines,
    }) = &out[0]
    else {
        panic!("{out:?}")
    };
    let left: Vec<u64> = lines.iter().map(|l| l.available_after).collect();
    assert_eq!(left, [8, 9]);
    assert_eq!(
        out[1].as_ref().unwrap(),
        &OrderOutcome::Replayed {
            status: stockd::domain::ReservationStatus::Reserved,
            created_ms: *created_ms,
            expires_ms: *expires_ms,
        }
    );
    assert_eq!(out[2].as_ref().unwrap(), &OrderOutcome::Mismatch);
    let Ok(OrderOutcome::Reserved { lines, .. }) = &out[3] else {
        panic!("{out:?}")
    };
    assert_eq!(lines[0].available_after, 7, "after the first order's two");
    assert_eq!(app.redis_available(1).await, Some(7));
    assert_eq!(app.redis_available(2).await, Some(9));
    drop_order_outboxes(&app).await;
    app.cleanup().await;
}

/// The call that empties two SKUs holds exactly their stock, refuses every
/// later order whole, and raises each SKU's sold-out flag once.
#[tokio::test]
async fn the_call_that_sells_the_last_units_raises_sold_out_once_per_sku() {
    let app = TestApp::with(options(STANDALONE_REDIS)).await;
    app.create_sku(1, 3, 1).await;
    app.create_sku(2, 4, 1).await;
    let settings = &app.direct_settings.redis;
    let client = redis::Client::open(settings.node_urls()[0].as_str()).unwrap();
    let mut pubsub = client.get_async_pubsub().await.unwrap();
    pubsub
        .subscribe(Keys::new(&settings.key_prefix).soldout_channel())
        .await
        .unwrap();

    let mut asks: Vec<OrderAsk> = (1..=3)
        .map(|i| ask(&format!("s-{i}"), 100 + i, &[(1, 1), (2, 1)]))
        .collect();
    asks.push(ask("s-4", 104, &[(1, 1), (2, 1)]));
    asks.push(ask("s-5", 105, &[(2, 1)]));
    asks.push(ask("s-6", 106, &[(2, 1)]));
    let out = decide(&app, &asks).await;
    assert!(out[..3].iter().all(is_held), "{out:?}");
    assert_eq!(
        out[3].as_ref().unwrap(),
        &OrderOutcome::Refused {
            sku_id: TestApp::sku(1),
            why: LineRefusal::SoldOut
        }
    );
    assert!(is_held(&out[4]), "the last unit of SKU 2: {out:?}");
    assert_eq!(
        out[5].as_ref().unwrap(),
        &OrderOutcome::Refused {
            sku_id: TestApp::sku(2),
            why: LineRefusal::SoldOut
        }
    );
    assert!(!line_held(&app, 2, "s-4").await, "never half an order");

    let mut messages = Vec::new();
    let mut stream = pubsub.on_message();
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(500), stream.next()).await
    {
        messages.push(msg.get_payload::<String>().unwrap());
    }
    messages.sort();
    assert_eq!(messages, ["S:1", "S:2"], "one broadcast per SKU");
    assert_eq!(app.redis_available(1).await, Some(0));
    assert_eq!(app.redis_available(2).await, Some(0));
    drop_order_outboxes(&app).await;
    app.cleanup().await;
}

/// A command that fails while one order is decided (a line's buyer key
/// holds a string) fails that order alone: the orders before and after it
/// keep the outcome they would have had, and nothing of it is written.
#[tokio::test]
async fn a_redis_error_in_one_order_fails_that_order_alone() {
    let app = TestApp::with(options(STANDALONE_REDIS)).await;
    app.create_sku(1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    let buyer = app
        .res
        .redis
        .keys()
        .user(TestApp::sku(2), UserId::new(8).unwrap());
    app.redis_cmd(&["SET", &buyer, "not a hash"]).await;

    let out = decide(
        &app,
        &[
            ask("e-1", 7, &[(1, 1), (2, 1)]),
            ask("e-2", 8, &[(1, 1), (2, 1)]),
            ask("e-3", 9, &[(1, 1), (2, 1)]),
        ],
    )
    .await;
    assert!(is_held(&out[0]), "{out:?}");
    assert!(
        matches!(&out[1], Err(RedisError::Script(text)) if text.contains("WRONGTYPE")),
        "{out:?}"
    );
    assert!(is_held(&out[2]), "{out:?}");
    assert_eq!(app.redis_available(1).await, Some(8), "two orders' units");
    assert_eq!(app.redis_available(2).await, Some(8));
    assert!(!line_held(&app, 1, "e-2").await, "nothing of e-2 written");
    let record = app
        .res
        .redis
        .orders()
        .record(&RequestId::parse("e-2").unwrap())
        .await
        .unwrap();
    assert!(record.is_none(), "{record:?}");
    app.redis_del(&[buyer]).await;
    drop_order_outboxes(&app).await;
    app.cleanup().await;
}

/// Concurrent orders through the lane share calls (fewer order script calls
/// than orders) and hold exactly the stock, every order whole or not at all.
#[tokio::test]
async fn concurrent_orders_share_calls_and_sell_exactly_the_stock() {
    const BUYERS: u64 = 60;
    let private = PrivateRedis::start().await;
    let app = TestApp::with(options(&private.url)).await;
    app.create_sku(1, 25, 1).await;
    app.create_sku(2, 25, 1).await;
    app.create_sku(3, 1000, 1).await;
    let before = private.script_calls().await;
    let orders = (1..=BUYERS).map(|buyer| {
        let store = app.res.redis.clone();
        async move {
            let a = ask(&format!("c-{buyer}"), buyer, &[(1, 1), (2, 1), (3, 1)]);
            let outcome = store
                .orders()
                .reserve(&a.order_id, a.user_id, &a.lines, &Requester::Anyone, false)
                .await
                .unwrap();
            matches!(outcome, OrderOutcome::Reserved { .. })
        }
    });
    let held = futures_util::future::join_all(orders).await;
    let calls_made = private.script_calls().await - before;
    assert_eq!(held.iter().filter(|h| **h).count(), 25);
    for (i, held) in held.iter().enumerate() {
        let order_id = format!("c-{}", i + 1);
        for sku in [1, 2, 3] {
            assert_eq!(line_held(&app, sku, &order_id).await, *held, "{order_id}");
        }
    }
    assert_eq!(app.redis_available(3).await, Some(975));
    assert!(
        calls_made < BUYERS,
        "{calls_made} script calls for {BUYERS} concurrent orders: no batch formed"
    );
    drop_order_outboxes(&app).await;
    app.cleanup().await;
}
