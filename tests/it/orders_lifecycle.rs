//! The lifecycle of a whole order (`ops::lifecycle`, an `OrderHold`): confirm,
//! cancel and expiry decide the order row and every line in one MySQL
//! transaction, then mirror each line to Redis. Orders are held by the
//! standalone order script and handed to the pipeline as the api will hand
//! them (one message through the reservations exchange, so the delay queue
//! gets it too); no route creates them yet.

use std::sync::Arc;
use std::time::{Duration, Instant};

use stockd::domain::{Deduction, RequestId, Requester, UserId};
use stockd::ops::lifecycle::{self, OrderHold, OrderTransitionOutcome, Transition};
use stockd::redis::OrderOutcome;
use stockd::roles::closer::Closer;

use crate::helpers::{TestApp, TestOptions};

/// The deployment's Redis (the local cluster in `make test-cluster`, where
/// orders are held line by line); the relay leaves the order's entries alone.
fn options(ttl_secs: u64, consumer: bool, closer: bool) -> TestOptions {
    TestOptions {
        ttl_secs,
        consumer,
        closer,
        tweak: Some(Arc::new(|s| {
            s.relay.idle_ms = 3_600_000;
            s.closer.grace_ms = 0;
        })),
        ..TestOptions::default()
    }
}

fn id(text: &str) -> RequestId {
    RequestId::parse(text).unwrap()
}

/// Holds order `order_id` of `buyer` over `(sku, count)` lines in Redis and
/// publishes it, as `POST /v1/orders` will; removes the outbox entries the
/// publish confirmed (the api's acker's job).
async fn place(app: &TestApp, order_id: &str, buyer: u64, parts: &[(u64, u32)]) {
    let lines = TestApp::order_lines(parts);
    let user = UserId::new(buyer).unwrap();
    let timeout = app.res.settings.orders.hold_timeout_ms;
    let outcome = stockd::ops::order_saga::place(
        &app.res.redis,
        &id(order_id),
        user,
        &lines,
        timeout,
        &Requester::Anyone,
        false,
    )
    .await
    .unwrap();
    let OrderOutcome::Reserved {
        created_ms,
        expires_ms,
        ..
    } = outcome
    else {
        panic!("order {order_id} not held: {outcome:?}")
    };
    let deductions = Deduction::of_order(&id(order_id), user, &lines, created_ms, expires_ms);
    app.res
        .publisher
        .publish_deductions(&deductions[..1])
        .await
        .unwrap();
    for &(sku, _) in parts {
        let key = app.res.redis.keys().outbox(TestApp::sku(sku));
        app.redis_cmd(&["DEL", &key]).await;
    }
    // An order held line by line has one entry, in its shard's stream.
    let shard = stockd::redis::keys::order_shard(&id(order_id));
    let key = app.res.redis.keys().order_outbox(shard);
    app.redis_cmd(&["DEL", &key]).await;
}

async fn order_status(app: &TestApp, order_id: &str) -> Option<String> {
    use mysql_async::prelude::Queryable;
    let mut db = app.mysql().await;
    db.exec_first("SELECT status FROM orders WHERE order_id = ?", (order_id,))
        .await
        .unwrap()
}

async fn decide(app: &TestApp, order_id: &str, transition: Transition) -> OrderTransitionOutcome {
    lifecycle::transition(
        &app.res.db,
        &app.res.redis,
        &OrderHold {
            order_id: &id(order_id),
        },
        transition,
        stockd::clock::unix_ms(),
        &Requester::Anyone,
    )
    .await
    .unwrap()
}

/// Confirm decides the whole order: the order row and both lines
/// CONFIRMED, stock stays sold; a repeat is unchanged; a cancel after it
/// is a conflict that returns nothing.
#[tokio::test]
async fn a_confirmed_order_confirms_every_line_and_cannot_be_cancelled() {
    let app = TestApp::with(options(900, true, false)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    place(&app, "pay-1", 4, &[(1, 2), (2, 1)]).await;
    app.wait_ledger_rows(2).await;
    let outcome = decide(&app, "pay-1", Transition::Confirm).await;
    assert!(matches!(
        outcome,
        OrderTransitionOutcome::Done { changed: true, .. }
    ));
    assert!(matches!(
        decide(&app, "pay-1", Transition::Confirm).await,
        OrderTransitionOutcome::Done { changed: false, .. }
    ));
    assert!(matches!(
        decide(&app, "pay-1", Transition::Cancel).await,
        OrderTransitionOutcome::Conflict { .. }
    ));
    assert_eq!(
        order_status(&app, "pay-1").await.as_deref(),
        Some("CONFIRMED")
    );
    for sku in [1, 2] {
        assert_eq!(
            app.ledger_status(sku, "pay-1").await.as_deref(),
            Some("CONFIRMED")
        );
    }
    assert_eq!(app.mysql_available(1).await, Some(3));
    assert_eq!(app.redis_available(1).await, Some(3));
    assert_eq!(app.mysql_available(2).await, Some(4));
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// Cancel releases every line: stock and quota back in both stores exactly
/// once (three cancels), the order record says RELEASED, and a payment
/// after it is a conflict.
#[tokio::test]
async fn a_cancelled_order_returns_every_line_once_in_both_stores() {
    let app = TestApp::with(options(900, true, false)).await;
    app.create_sku(1, 5, 1).await;
    app.create_sku(2, 5, 5).await;
    place(&app, "c-1", 4, &[(1, 1), (2, 3)]).await;
    app.wait_ledger_rows(2).await;
    for _ in 0..3 {
        assert!(matches!(
            decide(&app, "c-1", Transition::Cancel).await,
            OrderTransitionOutcome::Done { .. }
        ));
    }
    assert!(matches!(
        decide(&app, "c-1", Transition::Confirm).await,
        OrderTransitionOutcome::Conflict { .. }
    ));
    for sku in [1, 2] {
        assert_eq!(app.mysql_available(sku).await, Some(5), "sku {sku}");
        assert_eq!(app.redis_available(sku).await, Some(5), "sku {sku}");
    }
    let record = app.res.redis.orders().record(&id("c-1")).await.unwrap();
    assert_eq!(
        record.map(|r| r.status),
        Some(stockd::domain::ReservationStatus::Released)
    );
    // The buyer's quota of SKU 1 (limit 1) is back: a single reservation fits.
    app.reserve_ok(1, "after", 4, 1).await;
    app.wait_ledger_rows(3).await;
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// The consumer is behind: a cancel of an order only Redis holds applies
/// the whole order from its record first, then releases it; the late
/// message is a duplicate.
#[tokio::test]
async fn a_cancel_before_the_consumer_applies_the_whole_order_first() {
    let mut app = TestApp::with(options(900, false, false)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    place(&app, "early", 2, &[(1, 1), (2, 1)]).await;
    assert!(matches!(
        decide(&app, "early", Transition::Cancel).await,
        OrderTransitionOutcome::Done { changed: true, .. }
    ));
    assert_eq!(
        order_status(&app, "early").await.as_deref(),
        Some("RELEASED")
    );
    app.start_consumer();
    app.wait_drained(1).await;
    assert_eq!(app.ledger_rows().await, 2);
    for sku in [1, 2] {
        assert_eq!(app.mysql_available(sku).await, Some(5));
        assert_eq!(app.redis_available(sku).await, Some(5));
    }
    app.cleanup().await;
}

/// An unpaid order expires whole through the delay queue (2 s to pay):
/// both lines and the order row RELEASED with reason EXPIRED, stock back.
#[tokio::test]
async fn an_unpaid_order_expires_whole_through_the_delay_queue() {
    let app = TestApp::with(options(2, true, true)).await;
    app.create_sku(1, 3, 3).await;
    app.create_sku(2, 3, 3).await;
    let started = Instant::now();
    place(&app, "late", 1, &[(1, 1), (2, 2)]).await;
    app.eventually("order expired", Duration::from_secs(20), || async {
        order_status(&app, "late").await.as_deref() == Some("RELEASED")
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "released early"
    );
    for sku in [1, 2] {
        assert_eq!(
            app.ledger_status(sku, "late").await.as_deref(),
            Some("RELEASED")
        );
        assert_eq!(app.mysql_available(sku).await, Some(3));
    }
    app.eventually("Redis mirrored", Duration::from_secs(5), || async {
        app.redis_available(1).await == Some(3) && app.redis_available(2).await == Some(3)
    })
    .await;
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// The sweep releases an expired order whole (the delay message lost), and
/// only whole: its lines are never released one SKU at a time.
#[tokio::test]
async fn the_sweep_releases_an_expired_order_whole() {
    let app = TestApp::with(options(900, true, false)).await;
    app.create_sku(1, 4, 4).await;
    app.create_sku(2, 4, 4).await;
    place(&app, "swept", 3, &[(1, 1), (2, 1)]).await;
    app.wait_ledger_rows(2).await;
    app.sql("UPDATE orders SET expires_at_ms = 1 WHERE order_id = 'swept'")
        .await;
    app.sql("UPDATE stock_deduct_idempotent SET expires_at_ms = 1")
        .await;
    let closer = Closer::from_resources(&app.res);
    let swept = closer.sweep_once().await.unwrap();
    assert_eq!(swept.released, 1, "one order released, its lines with it");
    assert_eq!(
        order_status(&app, "swept").await.as_deref(),
        Some("RELEASED")
    );
    for sku in [1, 2] {
        assert_eq!(
            app.ledger_status(sku, "swept").await.as_deref(),
            Some("RELEASED")
        );
        assert_eq!(app.mysql_available(sku).await, Some(4));
        assert_eq!(app.redis_available(sku).await, Some(4));
    }
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// A line of an order never moves alone: the single routes answer 409
/// `ORDER_LINE` for it and change nothing.
#[tokio::test]
async fn a_line_of_an_order_is_not_confirmed_cancelled_or_extended_alone() {
    let app = TestApp::with(options(900, true, false)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    place(&app, "whole", 4, &[(1, 1), (2, 1)]).await;
    app.wait_ledger_rows(2).await;
    for action in ["confirm", "cancel", "extend"] {
        let (status, body) = app
            .post_json(&format!("/v1/skus/1/reservations/whole/{action}"))
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (409, Some("ORDER_LINE")),
            "{action}"
        );
    }
    assert_eq!(
        app.ledger_status(1, "whole").await.as_deref(),
        Some("RESERVED")
    );
    assert_eq!(
        order_status(&app, "whole").await.as_deref(),
        Some("RESERVED")
    );
    assert_eq!(app.mysql_available(1).await, Some(4));
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// D2 of the order seams (issue 50): a line the consumer has not applied
/// yet is not applied as a single reservation by a single route either —
/// confirm, cancel and extend answer 409 `ORDER_LINE` before anything is
/// written (on da17932 the cancel answered 200 RELEASED, and the consumer
/// then rejected the whole order after its 201); the order is then applied
/// whole. A single reservation with the order's id, buyer and count is a
/// mismatch (422), never a replay of the line.
#[tokio::test]
async fn a_line_not_yet_in_mysql_is_not_moved_alone_nor_replayed_as_a_single() {
    let mut app = TestApp::with(options(900, false, false)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    place(&app, "early", 4, &[(1, 1), (2, 1)]).await;
    for action in ["cancel", "confirm", "extend"] {
        let (status, body) = app
            .post_json(&format!("/v1/skus/1/reservations/early/{action}"))
            .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (409, Some("ORDER_LINE")),
            "{action}: {body}"
        );
    }
    assert_eq!(app.ledger_status(1, "early").await, None, "nothing applied");
    let (status, body) = app.reserve_at(&app.base, 1, "early", 4).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("IDEMPOTENCY_MISMATCH")),
        "{body}"
    );
    app.start_consumer();
    app.wait_ledger_rows(2).await;
    for sku in [1, 2] {
        assert_eq!(
            app.ledger_status(sku, "early").await.as_deref(),
            Some("RESERVED")
        );
    }
    assert_eq!(
        order_status(&app, "early").await.as_deref(),
        Some("RESERVED")
    );
    app.wait_drained(1).await;
    app.cleanup().await;
}
