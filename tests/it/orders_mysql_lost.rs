//! Orders MySQL acknowledged and then lost (a failover to an asynchronous
//! replica that had not applied them), played by undoing the commits in the
//! test's database, as `mysql_lost` does for single reservations: the
//! reconciler finds them `MYSQL_BEHIND` on each SKU of their lines, and its
//! repair re-applies each order whole, as an order (its order row and a line
//! row per SKU), never its lines as single reservations.

use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::json;

use stockd::domain::{RequestId, Requester, ReservationStatus, UserId};
use stockd::ops::invariants;
use stockd::ops::lifecycle::{self, OrderTransitionOutcome, Transition};
use stockd::ops::reconcile::Verdict;
use stockd::redis::order_holds::LineHold;
use stockd::redis::order_intents::{AbortOutcome, AbortStep, IntentOutcome};

use crate::helpers::{TestApp, TestOptions};
use crate::mysql_lost::{lose_decision, lose_deduction};

/// Judge lost work as soon as two looks agree (the age bound has its unit test).
fn judged_at_once() -> TestOptions {
    TestOptions {
        tweak: Some(Arc::new(|s| s.reconcile.lost_after_ms = 0)),
        ..TestOptions::default()
    }
}

async fn place(app: &TestApp, order_id: &str, user: u64, lines: &[(u64, u32)]) {
    let lines: Vec<_> = lines
        .iter()
        .map(|&(sku, count)| json!({"sku_id": TestApp::sku(sku).get(), "count": count}))
        .collect();
    let body = json!({"order_id": order_id, "user_id": user, "lines": lines});
    let resp = app
        .client
        .post(format!("{}/v1/orders", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "{order_id}");
}

async fn order_status(app: &TestApp, order_id: &str) -> Option<String> {
    let mut db = app.mysql().await;
    db.exec_first("SELECT status FROM orders WHERE order_id = ?", (order_id,))
        .await
        .unwrap()
}

/// (sku, status, order_line) of every ledger row of `order_id`.
async fn line_rows(app: &TestApp, order_id: &str) -> Vec<(u64, String, u8)> {
    let mut db = app.mysql().await;
    db.exec(
        "SELECT sku_id, status, order_line FROM stock_deduct_idempotent
         WHERE deduct_request_id = ? ORDER BY sku_id",
        (order_id,),
    )
    .await
    .unwrap()
}

/// Undoes the commit of `order_id`'s apply: its order row, its line rows
/// and their units go.
async fn lose_order(app: &TestApp, order_id: &str, lines: &[(u64, u32)]) {
    let mut db = app.mysql().await;
    db.exec_drop("DELETE FROM orders WHERE order_id = ?", (order_id,))
        .await
        .unwrap();
    for &(sku, count) in lines {
        lose_deduction(app, sku, order_id, i64::from(count)).await;
    }
}

/// Undoes the commit of `order_id`'s confirm: the order and its lines are
/// RESERVED again (a confirm moves no unit).
async fn lose_confirm(app: &TestApp, order_id: &str, lines: &[(u64, u32)]) {
    order_reserved_again(app, order_id).await;
    for &(sku, _) in lines {
        lose_decision(app, sku, order_id, 0).await;
    }
}

/// Undoes a cancel's commit: the order and its lines RESERVED again, their
/// units taken again.
async fn lose_cancel(app: &TestApp, order_id: &str, lines: &[(u64, u32)]) {
    order_reserved_again(app, order_id).await;
    for &(sku, count) in lines {
        lose_decision(app, sku, order_id, i64::from(count)).await;
    }
}

async fn order_reserved_again(app: &TestApp, order_id: &str) {
    let mut db = app.mysql().await;
    db.exec_drop(
        "UPDATE orders SET status = 'RESERVED', reason = NULL, finished_at_ms = NULL
         WHERE order_id = ?",
        (order_id,),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn orders_mysql_lost_are_reapplied_whole_as_orders() {
    let app = TestApp::with(judged_at_once()).await;
    app.create_sku(1, 20, 5).await;
    app.create_sku(2, 20, 5).await;
    let lost = [(1, 2), (2, 1)];
    let paid = [(1, 1), (2, 1)];
    place(&app, "o-lost", 1, &lost).await;
    place(&app, "o-paid", 2, &paid).await;
    for order_id in ["o-lost", "o-paid"] {
        app.eventually(order_id, Duration::from_secs(20), || async {
            order_status(&app, order_id).await.is_some()
        })
        .await;
    }
    assert_eq!(app.post_json("/v1/orders/o-paid/confirm").await.0, 200);
    app.wait_drained(1).await;
    app.wait_drained(2).await;
    let healthy = app.reconcile(false).await;
    assert!(
        healthy.skus.iter().all(|l| l.verdict == Verdict::Ok),
        "{healthy:?}"
    );

    lose_order(&app, "o-lost", &lost).await;
    lose_confirm(&app, "o-paid", &paid).await;
    let _first_look = app.reconcile(false).await;
    let second = app.reconcile(false).await;
    for line in &second.skus {
        assert_eq!(
            (line.verdict, line.lost_reservations),
            (Verdict::MysqlBehind, 2),
            "each SKU lost a line of o-lost and o-paid's confirm: {line:?}"
        );
    }

    // SKU 1's repair re-applies both orders whole (two re-applied, nothing
    // republished as a single reservation), so SKU 2 is healthy by its turn.
    let repaired = app.reconcile(true).await;
    let (first, second) = (&repaired.skus[0], &repaired.skus[1]);
    assert_eq!(
        (first.repaired, first.republished, first.reapplied),
        (true, 0, 2),
        "{first:?}"
    );
    assert_eq!(second.verdict, Verdict::Ok, "{second:?}");
    app.eventually("o-lost applied again", Duration::from_secs(20), || async {
        order_status(&app, "o-lost").await.is_some()
    })
    .await;
    app.wait_drained(1).await;
    app.wait_drained(2).await;
    assert_eq!(
        order_status(&app, "o-lost").await.as_deref(),
        Some("RESERVED")
    );
    assert_eq!(
        order_status(&app, "o-paid").await.as_deref(),
        Some("CONFIRMED")
    );
    let (one, two) = (TestApp::sku(1).get(), TestApp::sku(2).get());
    assert_eq!(
        line_rows(&app, "o-lost").await,
        [(one, "RESERVED".into(), 1), (two, "RESERVED".into(), 1)],
        "o-lost's lines are order lines again, not single reservations"
    );
    assert_eq!(
        line_rows(&app, "o-paid").await,
        [(one, "CONFIRMED".into(), 1), (two, "CONFIRMED".into(), 1)]
    );
    assert_eq!(app.mysql_available(1).await, Some(20 - 3));
    assert_eq!(app.mysql_available(2).await, Some(20 - 2));
    for _ in 0..2 {
        let after = app.reconcile(false).await;
        assert!(
            after.skus.iter().all(|l| l.verdict == Verdict::Ok),
            "{after:?}"
        );
    }
    let report = invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap();
    assert!(report.ok, "{report:?}");
    app.cleanup().await;
}

/// A confirm MySQL lost is not undone by a cancel or by the clock: both
/// re-apply the payment (409 `RESERVATION_CONFIRMED` to the cancel); a
/// cancel MySQL lost makes a late payment 409 `RESERVATION_RELEASED`.
#[tokio::test]
async fn an_order_decision_mysql_lost_is_reapplied_before_any_other() {
    let app = TestApp::with(TestOptions::default()).await;
    app.create_sku(1, 20, 5).await;
    app.create_sku(2, 20, 5).await;
    let lines = [(1, 1), (2, 2)];
    place(&app, "o-paid", 1, &lines).await;
    place(&app, "o-gone", 2, &lines).await;
    for order_id in ["o-paid", "o-gone"] {
        app.eventually(order_id, Duration::from_secs(20), || async {
            order_status(&app, order_id).await.is_some()
        })
        .await;
    }
    assert_eq!(app.post_json("/v1/orders/o-paid/confirm").await.0, 200);
    assert_eq!(app.post_json("/v1/orders/o-gone/cancel").await.0, 200);

    lose_confirm(&app, "o-paid", &lines).await;
    let (status, problem) = app.post_json("/v1/orders/o-paid/cancel").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("RESERVATION_CONFIRMED")),
        "{problem}"
    );
    assert_eq!(
        order_status(&app, "o-paid").await.as_deref(),
        Some("CONFIRMED")
    );

    lose_confirm(&app, "o-paid", &lines).await;
    let id = stockd::domain::RequestId::parse("o-paid").unwrap();
    let late = stockd::clock::unix_ms() + 24 * 3_600_000;
    let expired = lifecycle::transition(
        &app.res.db,
        &app.res.redis,
        &lifecycle::OrderHold { order_id: &id },
        Transition::Expire,
        late,
        &Requester::Anyone,
    )
    .await
    .unwrap();
    assert!(
        matches!(&expired, OrderTransitionOutcome::Conflict { row: order } if order.status == ReservationStatus::Confirmed),
        "{expired:?}"
    );
    assert_eq!(
        order_status(&app, "o-paid").await.as_deref(),
        Some("CONFIRMED")
    );

    lose_cancel(&app, "o-gone", &lines).await;
    let (status, problem) = app.post_json("/v1/orders/o-gone/confirm").await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("RESERVATION_RELEASED")),
        "{problem}"
    );
    assert_eq!(
        order_status(&app, "o-gone").await.as_deref(),
        Some("RELEASED")
    );
    assert_eq!(app.mysql_available(1).await, Some(20 - 1));
    assert_eq!(app.mysql_available(2).await, Some(20 - 2));
    app.wait_drained(1).await;
    app.wait_drained(2).await;
    let report = invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap();
    assert!(report.ok, "{report:?}");
    app.cleanup().await;
}

/// (expires_at_ms, extensions) of o-ext's order row, then of its lines.
async fn times(app: &TestApp) -> Vec<(u64, u32)> {
    let mut db = app.mysql().await;
    db.query(
        "SELECT expires_at_ms, extensions FROM orders WHERE order_id = 'o-ext'
         UNION ALL SELECT expires_at_ms, extensions FROM stock_deduct_idempotent
         WHERE deduct_request_id = 'o-ext'",
    )
    .await
    .unwrap()
}

/// An extension MySQL lost (the order row and its lines back at the first
/// time, no extension counted) is re-applied by the expiry at the old time
/// from the order record, instead of releasing an order the buyer was told
/// is held; the expiry at the moved time releases it.
#[tokio::test]
async fn an_order_extension_mysql_lost_is_reapplied_by_its_expiry() {
    let app = TestApp::with(TestOptions::default()).await;
    app.create_sku(1, 20, 5).await;
    app.create_sku(2, 20, 5).await;
    place(&app, "o-ext", 1, &[(1, 1), (2, 1)]).await;
    app.eventually("o-ext", Duration::from_secs(20), || async {
        order_status(&app, "o-ext").await.is_some()
    })
    .await;
    let first: Vec<(u64, u32)> = times(&app).await;
    let (first_ms, _) = first[0];
    let (status, extended) = app.post_json("/v1/orders/o-ext/extend").await;
    assert_eq!(status, 200, "{extended}");
    let moved = times(&app).await;
    let (moved_ms, _) = moved[0];
    assert!(moved_ms > first_ms);
    assert!(moved.iter().all(|&t| t == (moved_ms, 1)), "{moved:?}");

    let mut db = app.mysql().await;
    for table in ["orders", "stock_deduct_idempotent"] {
        let id = if table == "orders" {
            "order_id"
        } else {
            "deduct_request_id"
        };
        db.exec_drop(
            format!("UPDATE {table} SET expires_at_ms = ?, extensions = 0 WHERE {id} = 'o-ext'"),
            (first_ms,),
        )
        .await
        .unwrap();
    }
    drop(db);
    let id = stockd::domain::RequestId::parse("o-ext").unwrap();
    let (db, redis) = (&app.res.db, &app.res.redis);
    let at_old_time = lifecycle::transition(
        db,
        redis,
        &lifecycle::OrderHold { order_id: &id },
        Transition::Expire,
        first_ms + 1,
        &Requester::Anyone,
    )
    .await
    .unwrap();
    assert_eq!(at_old_time, OrderTransitionOutcome::NotYetExpired);
    assert_eq!(
        order_status(&app, "o-ext").await.as_deref(),
        Some("RESERVED")
    );
    let again = times(&app).await;
    assert!(
        again.iter().all(|&t| t == (moved_ms, 1)),
        "re-applied: {again:?}"
    );
    let at_new_time = lifecycle::transition(
        db,
        redis,
        &lifecycle::OrderHold { order_id: &id },
        Transition::Expire,
        moved_ms + 1,
        &Requester::Anyone,
    )
    .await
    .unwrap();
    assert!(
        matches!(&at_new_time, OrderTransitionOutcome::Done { row: order, changed: true } if order.status == ReservationStatus::Released),
        "{at_new_time:?}"
    );
    app.wait_drained(1).await;
    app.wait_drained(2).await;
    app.cleanup().await;
}

/// Lost work judged at once, attempts left open by the api's sweeper for a
/// minute, and SKUs 1 and 2 of 20 units (limit 5).
async fn with_attempts_left_open() -> TestApp {
    let app = TestApp::with(TestOptions {
        tweak: Some(Arc::new(|s| {
            s.reconcile.lost_after_ms = 0;
            // The api's sweeper must not undo an attempt during the test.
            s.orders.hold_timeout_ms = 60_000;
        })),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 20, 5).await;
    app.create_sku(2, 20, 5).await;
    app
}

/// An attempt held line by line that is not committed (an api stalled or
/// died between its holds, and no sweeper has undone it yet) is no lost
/// work: two repairing looks leave its held line to the sweeper and never
/// publish it as a single reservation (issue 50 D1: a phantom single in
/// MySQL, and the buyer's retry of the order rejected after its 201).
#[tokio::test]
async fn a_line_of_an_uncommitted_order_attempt_is_left_to_the_sweeper() {
    let app = with_attempts_left_open().await;
    let order_id = RequestId::parse("o-open").unwrap();
    let user = UserId::new(7).unwrap();
    let lines = TestApp::order_lines(&[(1, 2), (2, 1)]);
    let orders = app.res.redis.orders();
    let attempt = match orders
        .intent(&order_id, user, &lines, 60_000, &Requester::Anyone)
        .await
    {
        Ok(IntentOutcome::Hold(attempt)) => attempt,
        other => panic!("intent: {other:?}"),
    };
    let held = (app.res.redis.reservations())
        .hold_line(&attempt, TestApp::sku(1), 2)
        .await
        .unwrap();
    assert!(matches!(held, LineHold::Held { .. }), "{held:?}");

    for look in 0..2 {
        let report = app.reconcile(true).await;
        let line = &report.skus[0];
        assert_eq!(
            (line.lost_reservations, line.republished, line.reapplied),
            (0, 0, 0),
            "look {look}: an open attempt's line is not lost work: {line:?}"
        );
    }
    app.wait_drained(1).await;
    assert_eq!(
        line_rows(&app, "o-open").await,
        [],
        "the held line is not in the ledger as a single reservation"
    );

    // The sweeper's undo, as it would run past the deadline.
    match orders.abort(&order_id, None, AbortStep::Sweep).await {
        Ok(AbortOutcome::NotDue) => {}
        other => panic!("sweep before the deadline: {other:?}"),
    }
    match orders
        .abort(&order_id, Some(attempt.number), AbortStep::Own)
        .await
    {
        Ok(AbortOutcome::Undo { attempt, lines }) => {
            stockd::ops::order_saga::release_all(&app.res.redis, &attempt, &lines)
                .await
                .unwrap()
        }
        other => panic!("abort: {other:?}"),
    }
    app.wait_drained(1).await;
    app.cleanup().await;
}

/// The SKU view's `available`.
async fn available(app: &TestApp, sku: u64) -> i64 {
    let (status, view) = app.get_json(&format!("/v1/skus/{sku}")).await;
    assert_eq!(status, 200, "{view}");
    view["available"].as_i64().unwrap()
}

/// Issue 50 D6: lines stranded by a failover, which the sweeper cannot see
/// (no open intent names them): a line held whose intent was lost with its
/// shard, and a line an undo missed (its intent `ABORTED`, the line still
/// held). The audit names both as lines of an order not committed; two
/// repairing looks give their units back (MySQL never had either order),
/// never publishing them as single reservations; the buyer's retry of the
/// lost order is then held, not refused as a mismatch.
#[tokio::test]
async fn lines_stranded_by_a_lost_intent_or_a_missed_undo_are_given_back() {
    let app = with_attempts_left_open().await;
    let orders = app.res.redis.orders();
    let user = UserId::new(7).unwrap();
    let hold = |order: &'static str, sku: u64, count: u32| {
        let app = &app;
        async move {
            let order_id = RequestId::parse(order).unwrap();
            let lines = TestApp::order_lines(&[(sku, count)]);
            let attempt = match app
                .res
                .redis
                .orders()
                .intent(&order_id, user, &lines, 60_000, &Requester::Anyone)
                .await
            {
                Ok(IntentOutcome::Hold(attempt)) => attempt,
                other => panic!("intent: {other:?}"),
            };
            let held = (app.res.redis.reservations())
                .hold_line(&attempt, TestApp::sku(sku), count)
                .await
                .unwrap();
            assert!(matches!(held, LineHold::Held { .. }), "{held:?}");
            attempt
        }
    };
    // The intent lost with its shard: its record and its index entry gone.
    let lost = hold("o-lost", 1, 2).await;
    let keys = app.res.redis.keys();
    let shard = stockd::redis::keys::order_shard(&lost.order_id);
    let mut conn = app.redis_conn().await;
    let _: () = deadpool_redis::redis::cmd("DEL")
        .arg(keys.order(&lost.order_id))
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = deadpool_redis::redis::cmd("ZREM")
        .arg(keys.order_intents(shard))
        .arg(lost.order_id.as_str())
        .query_async(&mut conn)
        .await
        .unwrap();
    // The undo that missed its line: the intent ABORTED, the line held.
    let missed = hold("o-missed", 2, 1).await;
    for step in [AbortStep::Own, AbortStep::Done] {
        orders
            .abort(&missed.order_id, Some(missed.number), step)
            .await
            .unwrap();
    }
    assert_eq!(app.res.redis.orders().open_intents().await.unwrap(), 0);
    assert_eq!(available(&app, 1).await, 18);
    assert_eq!(available(&app, 2).await, 19);

    let report = invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap();
    let table = report.table();
    assert!(!report.ok, "the stranded lines are seen: {table}");
    for order in ["o-lost", "o-missed"] {
        assert!(table.contains(order), "{order} named: {table}");
    }

    for _ in 0..2 {
        app.reconcile(true).await;
    }
    app.wait_drained(1).await;
    app.wait_drained(2).await;
    assert_eq!(
        (available(&app, 1).await, available(&app, 2).await),
        (20, 20),
        "the stranded lines' units are back"
    );
    for order in ["o-lost", "o-missed"] {
        assert_eq!(line_rows(&app, order).await, [], "{order}: never a single");
    }
    let report = invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap();
    assert!(report.ok, "{}", report.table());

    let (status, answer) = app
        .place_order(&crate::helpers::http::order_body("o-lost", 7, &[(1, 2)]))
        .await;
    assert_eq!(status, 201, "the buyer's retry is held: {answer}");
    app.cleanup().await;
}
