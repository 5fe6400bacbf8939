//! The order script on a standalone Redis (`order.lua`, issue 26's first
//! layer): every line of an order is held in one atomic call, or none is.
//! What it writes for each line is what a single reservation writes, so the
//! buyer's `limit_per_user` counts order lines and single reservations
//! together; the order's one outbox entry carries the whole line list.

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_redis::redis;

use stockd::domain::{RequestId, Requester, ReservationStatus, UserId};
use stockd::redis::{LineRefusal, OrderOutcome, OutboxEntry};

use crate::helpers::{TestApp, TestOptions};

/// The shared standalone Redis, also in `make test-cluster`: the script is
/// the standalone path (on a cluster, `Orders::reserve` answers
/// `Unsupported` without calling Redis, checked below).
const STANDALONE_REDIS: &str = "redis://127.0.0.1:6379";

/// The relay never finds these entries stale during a test: nothing but the
/// script is under test, and no consumer knows orders yet.
fn no_relay() -> TestOptions {
    TestOptions {
        redis_url: Some(STANDALONE_REDIS.into()),
        tweak: Some(Arc::new(|s| s.relay.idle_ms = 3_600_000)),
        ..TestOptions::default()
    }
}

fn id(text: &str) -> RequestId {
    RequestId::parse(text).unwrap()
}

fn user(n: u64) -> UserId {
    UserId::new(n).unwrap()
}

async fn order(app: &TestApp, order_id: &str, buyer: u64, parts: &[(u64, u32)]) -> OrderOutcome {
    app.res
        .redis
        .orders()
        .reserve(
            &id(order_id),
            user(buyer),
            &TestApp::order_lines(parts),
            &Requester::Anyone,
            false,
        )
        .await
        .unwrap()
}

async fn hgetall(app: &TestApp, key: &str) -> HashMap<String, String> {
    let mut conn = app.redis_conn().await;
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// A buyer's live units of a SKU in Redis (`n` of the buyer hash).
async fn units(app: &TestApp, sku: u64, buyer: u64) -> u64 {
    let key = app.res.redis.keys().user(TestApp::sku(sku), user(buyer));
    hgetall(app, &key)
        .await
        .get("n")
        .map_or(0, |n| n.parse().unwrap())
}

/// Every outbox entry of a SKU, parsed as the relay parses them.
async fn outbox(app: &TestApp, sku: u64) -> Vec<OutboxEntry> {
    app.res
        .redis
        .outbox()
        .stale(TestApp::sku(sku), 0, 1000)
        .await
        .unwrap()
}

/// The order's outbox entries (its shard's stream), as the relay reads them.
async fn order_entries(app: &TestApp, order_id: &str) -> Vec<OutboxEntry> {
    let shard = stockd::redis::keys::order_shard(&id(order_id));
    let entries = app
        .res
        .redis
        .outbox()
        .stale_orders(shard, 0, 1000)
        .await
        .unwrap();
    entries
        .into_iter()
        .filter(|e| e.message.request_id.as_str() == order_id)
        .collect()
}

/// The entries are the test's, not the pipeline's: removed before cleanup
/// (the SKUs' streams and every order shard's).
async fn drop_outboxes(app: &TestApp, skus: &[u64]) {
    for &sku in skus {
        let key = app.res.redis.keys().outbox(TestApp::sku(sku));
        app.redis_cmd(&["DEL", &key]).await;
    }
    for shard in 0..stockd::redis::keys::ORDER_SHARDS {
        let key = app.res.redis.keys().order_outbox(shard);
        app.redis_cmd(&["DEL", &key]).await;
    }
}

/// One line short: nothing is held anywhere (stock, records, buyer units,
/// outboxes, order record). Then the order that fits holds every line,
/// exactly as single reservations would, and each entry names the order.
#[tokio::test]
async fn an_order_is_held_whole_or_not_at_all() {
    let app = TestApp::with(no_relay()).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 1, 5).await;
    app.create_sku(3, 5, 5).await;
    let refused = order(&app, "o-1", 7, &[(3, 1), (1, 2), (2, 2)]).await;
    assert_eq!(
        refused,
        OrderOutcome::Refused {
            sku_id: TestApp::sku(2),
            why: LineRefusal::Insufficient { available: 1 }
        }
    );
    for (sku, left) in [(1, 5), (2, 1), (3, 5)] {
        assert_eq!(app.redis_available(sku).await, Some(left), "sku {sku}");
        assert_eq!(units(&app, sku, 7).await, 0);
        assert!(outbox(&app, sku).await.is_empty());
        assert!(order_entries(&app, "o-1").await.is_empty());
        let record = app
            .res
            .redis
            .keys()
            .reservation(TestApp::sku(sku), &id("o-1"));
        assert!(hgetall(&app, &record).await.is_empty());
    }
    assert!(hgetall(&app, &app.res.redis.keys().order(&id("o-1")))
        .await
        .is_empty());

    let held = order(&app, "o-1", 7, &[(3, 1), (1, 2), (2, 1)]).await;
    let OrderOutcome::Reserved {
        lines: held,
        expires_ms,
        ..
    } = held
    else {
        panic!("not held: {held:?}")
    };
    let skus: Vec<u64> = held.iter().map(|l| l.sku_id.get()).collect();
    assert_eq!(skus, [1, 2, 3], "lines in SKU order");
    let the_lines = TestApp::order_lines(&[(1, 2), (2, 1), (3, 1)]);
    for (sku, left, count) in [(1, 3, 2u32), (2, 0, 1), (3, 4, 1)] {
        assert_eq!(app.redis_available(sku).await, Some(left), "sku {sku}");
        assert_eq!(units(&app, sku, 7).await, u64::from(count));
        let record = app
            .res
            .redis
            .reservations()
            .reservation(TestApp::sku(sku), &id("o-1"))
            .await
            .unwrap()
            .expect("line record");
        assert_eq!(
            (record.status, record.count, record.expires_at_ms),
            (ReservationStatus::Reserved, count, expires_ms)
        );
        // No entry of its own: the order has one, in its shard's stream.
        assert!(outbox(&app, sku).await.is_empty(), "sku {sku}");
    }
    let entries = order_entries(&app, "o-1").await;
    assert_eq!(entries.len(), 1, "one outbox entry per order");
    let deduction = &entries[0].message;
    assert_eq!(
        (deduction.sku_id, deduction.count, deduction.user_id),
        (TestApp::sku(1), 2, user(7))
    );
    assert_eq!(deduction.order.as_ref(), Some(&the_lines));
    let record = hgetall(&app, &app.res.redis.keys().order(&id("o-1"))).await;
    assert_eq!(record["lines"], "1:2,2:1,3:1");
    assert_eq!(record["status"], "RESERVED");
    drop_outboxes(&app, &[1, 2, 3]).await;
    app.cleanup().await;
}

/// The same order again is a replay with the stored times; the same id with
/// other lines or another buyer is a mismatch; neither holds anything more.
#[tokio::test]
async fn a_replay_answers_the_stored_order_and_a_changed_one_is_a_mismatch() {
    let app = TestApp::with(no_relay()).await;
    app.create_sku(1, 10, 10).await;
    app.create_sku(2, 10, 10).await;
    let OrderOutcome::Reserved {
        created_ms,
        expires_ms,
        ..
    } = order(&app, "o-2", 1, &[(1, 1), (2, 1)]).await
    else {
        panic!("not held")
    };
    assert_eq!(
        order(&app, "o-2", 1, &[(2, 1), (1, 1)]).await,
        OrderOutcome::Replayed {
            status: ReservationStatus::Reserved,
            created_ms,
            expires_ms
        }
    );
    for (buyer, parts) in [
        (1, vec![(1, 1), (2, 2)]),
        (1, vec![(1, 1)]),
        (2, vec![(1, 1), (2, 1)]),
    ] {
        assert_eq!(
            order(&app, "o-2", buyer, &parts).await,
            OrderOutcome::Mismatch
        );
    }
    assert_eq!(app.redis_available(1).await, Some(9));
    assert_eq!(app.redis_available(2).await, Some(9));
    assert_eq!(order_entries(&app, "o-2").await.len(), 1);
    drop_outboxes(&app, &[1, 2]).await;
    app.cleanup().await;
}

/// `limit_per_user` counts a buyer's single reservations and order lines of
/// a SKU together, both ways round.
#[tokio::test]
async fn the_buyer_limit_spans_order_lines_and_single_reservations() {
    let app = TestApp::with(no_relay()).await;
    app.create_sku(1, 10, 2).await;
    app.create_sku(2, 10, 5).await;
    app.reserve_ok(1, "single-1", 7, 1).await;
    assert_eq!(
        order(&app, "o-3", 7, &[(1, 2), (2, 1)]).await,
        OrderOutcome::Refused {
            sku_id: TestApp::sku(1),
            why: LineRefusal::LimitExceeded {
                bought: 1,
                limit: 2
            }
        }
    );
    assert!(matches!(
        order(&app, "o-3", 7, &[(1, 1), (2, 1)]).await,
        OrderOutcome::Reserved { .. }
    ));
    let refused = app.reserve(1, "single-2", 7, 1).await;
    assert_eq!(refused.status(), 409);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "LIMIT_EXCEEDED");
    // SKU 1's outbox holds the single reservation's entry: wait for the
    // pipeline to take it, then drop the order's.
    app.wait_ledger_rows(1).await;
    drop_outboxes(&app, &[1, 2]).await;
    app.cleanup().await;
}

/// A line on a SKU that is not loaded, on a split SKU, or whose SKU already
/// holds a single reservation of the order's id: refused, nothing held.
#[tokio::test]
async fn lines_the_standalone_script_cannot_hold_are_refused_whole() {
    let app = TestApp::with(no_relay()).await;
    app.create_sku(1, 10, 10).await;
    let (status, _) = app
        .put_sku_json(
            2,
            &serde_json::json!({"total_stock": 10, "limit_per_user": 10, "buckets": 2}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        order(&app, "o-4", 1, &[(1, 1), (99, 1)]).await,
        OrderOutcome::Refused {
            sku_id: TestApp::sku(99),
            why: LineRefusal::NotLoaded
        }
    );
    assert_eq!(
        order(&app, "o-4", 1, &[(1, 1), (2, 1)]).await,
        OrderOutcome::Refused {
            sku_id: TestApp::sku(2),
            why: LineRefusal::Split
        }
    );
    app.reserve_ok(1, "o-5", 1, 1).await;
    assert_eq!(
        order(&app, "o-5", 1, &[(1, 1)]).await,
        OrderOutcome::Mismatch
    );
    assert_eq!(app.redis_available(1).await, Some(9));
    app.finish_drained_and_conserved(1).await;
}

/// 40 buyers race 2-line orders for SKUs A and B (10 units each), lines
/// given in either order: exactly 10 orders are held, each with both lines,
/// and every other one holds nothing.
#[tokio::test]
async fn racing_two_line_orders_sell_exactly_the_stock_and_never_half_an_order() {
    const BUYERS: u64 = 40;
    let app = TestApp::with(no_relay()).await;
    app.create_sku(1, 10, 1).await;
    app.create_sku(2, 10, 1).await;
    let races = (1..=BUYERS).map(|buyer| {
        let app = &app;
        async move {
            let parts = if buyer % 2 == 0 {
                [(1, 1), (2, 1)]
            } else {
                [(2, 1), (1, 1)]
            };
            let outcome = order(app, &format!("race-{buyer}"), buyer, &parts).await;
            (buyer, matches!(outcome, OrderOutcome::Reserved { .. }))
        }
    });
    let results = futures_util::future::join_all(races).await;
    let held = results.iter().filter(|(_, held)| *held).count();
    assert_eq!(held, 10);
    for (buyer, held) in results {
        for sku in [1, 2] {
            let record = app
                .res
                .redis
                .reservations()
                .reservation(TestApp::sku(sku), &id(&format!("race-{buyer}")))
                .await
                .unwrap();
            assert_eq!(record.is_some(), held, "buyer {buyer}, sku {sku}");
        }
    }
    assert_eq!(app.redis_available(1).await, Some(0));
    assert_eq!(app.redis_available(2).await, Some(0));
    drop_outboxes(&app, &[1, 2]).await;
    app.cleanup().await;
}

/// On a Redis Cluster the order script is never run: its lines live in
/// different slots, which one script cannot span (CROSSSLOT). Until the
/// intent protocol lands, the store says so before calling Redis.
#[tokio::test]
async fn a_cluster_store_refuses_orders_without_calling_redis() {
    let mut settings = crate::helpers::test_settings("orders-cluster", &TestOptions::default());
    settings.redis.mode = stockd::config::RedisMode::Cluster;
    settings.redis.urls = vec!["redis://127.0.0.1:1".into()];
    let store = stockd::redis::RedisStore::new(&settings.redis, 60).unwrap();
    let outcome = store
        .orders()
        .reserve(
            &id("o-c"),
            user(1),
            &TestApp::order_lines(&[(1, 1), (2, 1)]),
            &Requester::Anyone,
            false,
        )
        .await
        .unwrap();
    assert_eq!(outcome, OrderOutcome::Unsupported);
}

/// The orders row and the ledger rows of an order, as MySQL has them:
/// `(status, reason, failed_sku_id)` and `sku -> (status, reason)`.
async fn mysql_order(
    app: &TestApp,
    order_id: &str,
) -> (
    Option<(String, Option<String>, Option<u64>)>,
    HashMap<u64, (String, Option<String>)>,
) {
    use mysql_async::prelude::Queryable;
    let mut db = app.mysql().await;
    let order = db
        .exec_first(
            "SELECT status, reason, failed_sku_id FROM orders WHERE order_id = ?",
            (order_id,),
        )
        .await
        .unwrap();
    let lines: Vec<(u64, String, Option<String>, u8)> = db
        .exec(
            "SELECT sku_id, status, reason, order_line FROM stock_deduct_idempotent
             WHERE deduct_request_id = ?",
            (order_id,),
        )
        .await
        .unwrap();
    assert!(
        lines.iter().all(|l| l.3 == 1),
        "every row is marked an order line"
    );
    let lines = lines
        .into_iter()
        .map(|(sku, st, why, _)| (sku, (st, why)))
        .collect();
    (order, lines)
}

/// Publishes one line's deduction of an order, as the relay republishes one
/// line's outbox entry: the consumer expands it into the whole order.
async fn publish_one_line(app: &TestApp, order_id: &str, buyer: u64, parts: &[(u64, u32)]) {
    let lines = TestApp::order_lines(parts);
    let deductions =
        stockd::domain::Deduction::of_order(&id(order_id), user(buyer), &lines, 1, u64::MAX / 2);
    let payload = stockd::mq::message::encode(&deductions[..1]);
    let queue = app.res.publisher.topology().deduct_queue.clone();
    app.publish_to_queue(&queue, &payload, lapin::BasicProperties::default())
        .await;
}

/// One line's message is enough: the consumer applies every line of the
/// order, and the order row, in one transaction; the other line's message
/// is a duplicate.
#[tokio::test]
async fn the_consumer_applies_a_whole_order_from_any_one_of_its_lines() {
    let app = TestApp::with(no_relay()).await;
    app.create_sku(1, 10, 10).await;
    app.create_sku(2, 10, 10).await;
    publish_one_line(&app, "o-w", 3, &[(1, 2), (2, 1)]).await;
    app.wait_ledger_rows(2).await;
    let (order, lines) = mysql_order(&app, "o-w").await;
    assert_eq!(order, Some(("RESERVED".into(), None, None)));
    assert_eq!(lines[&1], ("RESERVED".into(), None));
    assert_eq!(lines[&2], ("RESERVED".into(), None));
    assert_eq!(app.mysql_available(1).await, Some(8));
    assert_eq!(app.mysql_available(2).await, Some(9));
    // The second line's message: a duplicate, nothing moves.
    let lines = TestApp::order_lines(&[(1, 2), (2, 1)]);
    let deductions =
        stockd::domain::Deduction::of_order(&id("o-w"), user(3), &lines, 1, u64::MAX / 2);
    let payload = stockd::mq::message::encode(&deductions[1..]);
    let queue = app.res.publisher.topology().deduct_queue.clone();
    app.publish_to_queue(&queue, &payload, lapin::BasicProperties::default())
        .await;
    app.wait_drained(2).await;
    assert_eq!(app.ledger_rows().await, 2);
    assert_eq!(app.mysql_available(1).await, Some(8));
    app.cleanup().await;
}

/// MySQL cannot cover one line (Redis was ahead, or the buyer's limit in
/// MySQL is reached): the whole order is REJECTED, every line with it, and
/// no line takes stock — nothing of the order is live in MySQL.
#[tokio::test]
async fn an_order_with_one_line_mysql_cannot_cover_is_rejected_whole() {
    let app = TestApp::with(no_relay()).await;
    app.create_sku(1, 10, 10).await;
    app.create_sku(2, 10, 1).await;
    app.create_sku(3, 1, 10).await;
    // Over the buyer's limit of SKU 2 in MySQL.
    publish_one_line(&app, "o-lim", 5, &[(1, 1), (2, 2)]).await;
    // More than SKU 3 has.
    publish_one_line(&app, "o-over", 6, &[(1, 1), (3, 2)]).await;
    app.wait_ledger_rows(4).await;
    let (order, lines) = mysql_order(&app, "o-lim").await;
    assert_eq!(
        order,
        Some(("REJECTED".into(), Some("LIMIT_EXCEEDED".into()), Some(2)))
    );
    assert_eq!(
        lines[&1],
        ("REJECTED".into(), Some("ORDER_REJECTED".into()))
    );
    assert_eq!(
        lines[&2],
        ("REJECTED".into(), Some("LIMIT_EXCEEDED".into()))
    );
    let (order, lines) = mysql_order(&app, "o-over").await;
    assert_eq!(
        order,
        Some(("REJECTED".into(), Some("OVER_ADMITTED".into()), Some(3)))
    );
    assert_eq!(lines[&3], ("REJECTED".into(), Some("OVER_ADMITTED".into())));
    for (sku, total) in [(1, 10), (2, 10), (3, 1)] {
        assert_eq!(app.mysql_available(sku).await, Some(total), "sku {sku}");
    }
    app.cleanup().await;
}

/// An order whose id names a single reservation of one of its SKUs in MySQL
/// (Redis forgot the single and admitted the order): the consumer inserts an
/// order's lines without looking each up, so the single's row fails that
/// insert; the run is applied again with every line looked up, and the
/// order is rejected whole (`ORDER_REJECTED` naming that SKU), the single's
/// row untouched, no stock taken by the order.
#[tokio::test]
async fn an_order_whose_id_names_a_single_reservation_in_mysql_is_rejected_whole() {
    use mysql_async::prelude::Queryable;
    use stockd::db::ledger::apply_batch;
    use stockd::domain::Deduction;
    let app = TestApp::with(no_relay()).await;
    app.create_sku(1, 10, 10).await;
    app.create_sku(2, 10, 10).await;
    let single = Deduction {
        request_id: id("o-same"),
        sku_id: TestApp::sku(1),
        user_id: user(5),
        count: 1,
        created_ms: 1,
        expires_ms: u64::MAX / 2,
        order: None,
        client: None,
    };
    let report = apply_batch(&app.res.db, &[single], 0).await.unwrap();
    assert_eq!(report.applied, 1);
    let lines = TestApp::order_lines(&[(1, 2), (2, 1)]);
    let msgs = Deduction::of_order(&id("o-same"), user(6), &lines, 1, u64::MAX / 2);
    let report = apply_batch(&app.res.db, &msgs[..1], 0).await.unwrap();
    assert_eq!((report.applied, report.duplicates), (0, 1));
    let mut db = app.mysql().await;
    let order: Option<(String, Option<String>, Option<u64>)> = db
        .exec_first(
            "SELECT status, reason, failed_sku_id FROM orders WHERE order_id = ?",
            ("o-same",),
        )
        .await
        .unwrap();
    let sku1 = TestApp::sku(1).get();
    assert_eq!(
        order,
        Some(("REJECTED".into(), Some("ORDER_REJECTED".into()), Some(sku1)))
    );
    let rows: Vec<(u64, u64, String, u8)> = db
        .exec(
            "SELECT sku_id, user_id, status, order_line FROM stock_deduct_idempotent
             WHERE deduct_request_id = ? ORDER BY sku_id",
            ("o-same",),
        )
        .await
        .unwrap();
    let sku2 = TestApp::sku(2).get();
    assert_eq!(
        rows,
        [
            (sku1, 5, "RESERVED".to_string(), 0),
            (sku2, 6, "REJECTED".to_string(), 1)
        ],
        "the single's row as it was; the order's other line rejected"
    );
    assert_eq!(app.mysql_available(1).await, Some(9), "the single's unit");
    assert_eq!(app.mysql_available(2).await, Some(10));
    app.cleanup().await;
}
