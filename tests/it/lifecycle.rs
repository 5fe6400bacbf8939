//! The reservation lifecycle: confirm, cancel, expiry (delay queue and sweep),
//! races and out-of-order arrival (contract §5; §10 invariants 5 and 8).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::prelude::Queryable;

use stockd::domain::Deduction;
use stockd::domain::{RequestId, UserId};
use stockd::ops::sweep::Swept;
use stockd::roles::closer::Closer;

use crate::helpers::{TestApp, TestOptions};

/// Stamps are whole milliseconds; a few more than one absorb the rounding.
const CLOCK_ROUNDING: Duration = Duration::from_millis(5);

/// About time itself: no event marks a reservation's TTL running out, so the
/// test waits out the rest of it — from the reserve's answer, so the time the
/// test spent since counts — plus the ms clock's rounding. Any shorter, and
/// the closer would find reservations still live: not the race under test.
async fn wait_past(expires_by: Instant) {
    tokio::time::sleep_until((expires_by + CLOCK_ROUNDING).into()).await;
}

fn ttl(secs: u64, closer: bool) -> TestOptions {
    TestOptions {
        ttl_secs: secs,
        closer,
        ..TestOptions::default()
    }
}

/// Confirm, then cancel → 409 RESERVATION_CONFIRMED; repeats are 200 with the
/// same body; stock moved once and is never returned for a confirmed unit.
#[tokio::test]
async fn a_confirmed_reservation_cannot_be_cancelled() {
    let app = TestApp::spawn_with_sku(1, 5, 2).await;
    app.reserve_ok(1, "p", 1, 2).await;
    let (s1, first) = app.confirm(1, "p").await;
    assert_eq!((s1, first["status"].as_str()), (200, Some("CONFIRMED")));
    let (s2, again) = app.confirm(1, "p").await;
    assert_eq!((s2, &again), (200, &first));
    let (s3, body) = app.cancel(1, "p").await;
    assert_eq!(
        (s3, body["code"].as_str()),
        (409, Some("RESERVATION_CONFIRMED"))
    );
    app.wait_drained(1).await;
    assert_eq!(app.mysql_available(1).await, Some(3));
    assert_eq!(app.redis_available(1).await, Some(3));
    assert_eq!(
        app.ledger_status(1, "p").await.as_deref(),
        Some("CONFIRMED")
    );
    app.finish_conserved(1).await;
}

/// Cancel, then confirm → 409 RESERVATION_RELEASED (the order service refunds);
/// repeats are 200; stock and quota come back exactly once, in both stores.
#[tokio::test]
async fn a_cancelled_reservation_cannot_be_confirmed_and_returns_stock_once() {
    let app = TestApp::spawn_with_sku(1, 5, 1).await;
    app.reserve_ok(1, "c", 1, 1).await;
    for _ in 0..3 {
        let (s, body) = app.cancel(1, "c").await;
        assert_eq!((s, body["status"].as_str()), (200, Some("RELEASED")));
    }
    let (s, body) = app.confirm(1, "c").await;
    assert_eq!(
        (s, body["code"].as_str()),
        (409, Some("RESERVATION_RELEASED"))
    );
    app.wait_drained(1).await;
    assert_eq!(app.mysql_available(1).await, Some(5));
    assert_eq!(app.redis_available(1).await, Some(5));
    // Quota returned: the same user (limit 1) may reserve again.
    app.reserve_ok(1, "c2", 1, 1).await;
    let (s, _) = app.cancel(1, "nope").await;
    assert_eq!(s, 404);
    app.wait_ledger_rows(2).await;
    app.finish_drained_and_conserved(1).await;
}

/// Expiry through the delay queue: with a 2 s TTL the closer releases the unpaid
/// reservation; Redis and MySQL get the unit back; the user may reserve again.
#[tokio::test]
async fn an_unpaid_reservation_expires_through_the_delay_queue() {
    let app = TestApp::with(ttl(2, true)).await;
    app.create_sku(1, 3, 1).await;
    let started = Instant::now();
    app.reserve_ok(1, "e", 1, 1).await;
    app.eventually("expired", Duration::from_secs(15), || async {
        app.ledger_status(1, "e").await.as_deref() == Some("RELEASED")
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "released before its time"
    );
    app.eventually("Redis mirrored", Duration::from_secs(5), || async {
        app.redis_available(1).await == Some(3)
    })
    .await;
    assert_eq!(app.mysql_available(1).await, Some(3));
    let mut db = app.mysql().await;
    let reason: Option<String> = mysql_async::prelude::Queryable::exec_first(
        &mut db,
        "SELECT reason FROM stock_deduct_idempotent WHERE deduct_request_id = 'e'",
        (),
    )
    .await
    .unwrap();
    drop(db);
    assert_eq!(reason.as_deref(), Some("EXPIRED"));
    assert_eq!(
        app.reserve(1, "e2", 1, 1).await.status(),
        201,
        "quota returned"
    );
    app.cleanup().await;
}

/// Backstop: with the delay queue purged, the sweep still releases every unpaid
/// reservation within TTL + grace + sweep period (invariant 8).
#[tokio::test]
async fn the_sweep_releases_what_the_delay_queue_lost() {
    let app = TestApp::with(ttl(2, true)).await;
    app.create_sku(1, 10, 10).await;
    for i in 0..5 {
        assert_eq!(app.reserve(1, &format!("s{i}"), 1, 1).await.status(), 201);
    }
    let started = Instant::now();
    app.wait_ledger_rows(5).await;
    let delay = app.res.publisher.topology().expiry_delay_queue.clone();
    app.purge_queue(&delay).await;
    let settings = &app.res.settings;
    let bound = Duration::from_millis(
        settings.reservation.ttl_secs * 1000
            + settings.closer.grace_ms
            + settings.closer.sweep_interval_ms,
    ) + Duration::from_secs(2); // scheduling slack on a loaded CI machine
    app.eventually("all released by the sweep", bound, || async {
        app.ledger_by_status(1).await.get("RELEASED") == Some(&(5, 5))
    })
    .await;
    assert!(started.elapsed() <= bound);
    app.eventually("Redis mirrored", Duration::from_secs(5), || async {
        app.redis_available(1).await == Some(10)
    })
    .await;
    app.finish_drained_and_conserved(1).await;
}

/// The closer's sweep step is one bounded batch per SKU: with
/// `closer.sweep_batch` 2, five expired rows take three steps (full, full,
/// then not full: the loop would sleep), each release mirrored to Redis.
#[tokio::test]
async fn one_sweep_step_releases_one_batch_and_says_when_to_go_again() {
    let app = TestApp::with(TestOptions {
        // The 900 s TTL keeps the delay queue out of it; no closer runs.
        tweak: Some(Arc::new(|s| s.closer.sweep_batch = 2)),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 10).await;
    for i in 0..5 {
        assert_eq!(app.reserve(1, &format!("w{i}"), 1, 1).await.status(), 201);
    }
    app.wait_ledger_rows(5).await;
    let closer = Closer::from_resources(&app.res);
    assert_eq!(closer.sweep_once().await.unwrap(), Swept::default());
    // Expired in MySQL, which is all the sweep reads: no wait for the clock.
    let mut db = app.mysql().await;
    db.query_drop("UPDATE stock_deduct_idempotent SET expires_at_ms = 1")
        .await
        .unwrap();
    drop(db);
    let mut steps = Vec::new();
    for _ in 0..3 {
        let swept = closer.sweep_once().await.unwrap();
        steps.push((swept.released, swept.full));
    }
    assert_eq!(steps, [(2, true), (2, true), (1, false)]);
    assert_eq!(app.ledger_by_status(1).await.get("RELEASED"), Some(&(5, 5)));
    assert_eq!(app.redis_available(1).await, Some(10));
    app.finish_drained_and_conserved(1).await;
}

/// Duplicate expiry messages and repeated cancels release once.
#[tokio::test]
async fn duplicate_expiries_and_cancels_release_exactly_once() {
    let app = TestApp::with(ttl(1, false)).await;
    app.create_sku(1, 4, 4).await;
    app.reserve_ok(1, "d", 7, 2).await;
    let expires_by = Instant::now() + Duration::from_secs(1);
    app.wait_ledger_rows(1).await;
    wait_past(expires_by).await;
    let msg = Deduction {
        request_id: RequestId::parse("d").unwrap(),
        sku_id: TestApp::sku(1),
        user_id: UserId::new(7).unwrap(),
        count: 2,
        created_ms: 0,
        expires_ms: 0,
        order: None,
        client: None,
    };
    let closer = Closer::from_resources(&app.res);
    let (a, b, c, d) = tokio::join!(
        closer.expire(&msg),
        closer.expire(&msg),
        app.cancel(1, "d"),
        app.cancel(1, "d"),
    );
    assert!(a.is_ok() && b.is_ok());
    assert_eq!((c.0, d.0), (200, 200));
    assert!(closer.expire(&msg).await.is_ok());
    app.wait_drained(1).await;
    assert_eq!(app.mysql_available(1).await, Some(4));
    app.eventually("Redis mirrored once", Duration::from_secs(5), || async {
        app.redis_available(1).await == Some(4)
    })
    .await;
    app.finish_conserved(1).await;
}

/// Race: confirm and expiry fired at the same moment for 200 reservations → each
/// ends CONFIRMED or RELEASED, never both; both stores match the confirmed count.
#[tokio::test]
async fn pay_and_expiry_racing_have_exactly_one_winner_each() {
    let app = TestApp::with(ttl(1, false)).await;
    const N: u64 = 200;
    app.create_sku(1, N as i64, 1).await;
    for i in 0..N {
        assert_eq!(
            app.reserve(1, &format!("r{i}"), i + 1, 1).await.status(),
            201
        );
    }
    // The last reservation answered: every expiry lies before this instant.
    let expires_by = Instant::now() + Duration::from_secs(1);
    app.wait_ledger_rows(N).await;
    wait_past(expires_by).await;
    let closer = Closer::from_resources(&app.res);
    let races = (0..N).map(|i| {
        let app = &app;
        let closer = &closer;
        async move {
            let rid = format!("r{i}");
            let msg = Deduction {
                request_id: RequestId::parse(&rid).unwrap(),
                sku_id: TestApp::sku(1),
                user_id: UserId::new(i + 1).unwrap(),
                count: 1,
                created_ms: 0,
                expires_ms: 0,
                order: None,
                client: None,
            };
            let ((status, body), expired) = tokio::join!(app.confirm(1, &rid), closer.expire(&msg));
            assert!(expired.is_ok());
            match status {
                200 => assert_eq!(body["status"], "CONFIRMED"),
                409 => assert_eq!(body["code"], "RESERVATION_RELEASED"),
                other => panic!("unexpected {other}: {body}"),
            }
            status == 200
        }
    });
    // Each pair races; pairs run 16 at a time so the MySQL pool is not the
    // thing being measured.
    let confirmed = futures_util::stream::iter(races)
        .buffer_unordered(16)
        .collect::<Vec<bool>>()
        .await
        .into_iter()
        .filter(|c| *c)
        .count() as i64;
    let by_status = app.ledger_by_status(1).await;
    let c = by_status.get("CONFIRMED").map_or(0, |v| v.1);
    let r = by_status.get("RELEASED").map_or(0, |v| v.1);
    assert_eq!(c, confirmed);
    assert_eq!(
        c + r,
        N as i64,
        "every reservation ended exactly one way: {by_status:?}"
    );
    assert_eq!(app.mysql_available(1).await, Some(N as i64 - confirmed));
    app.eventually("Redis matches", Duration::from_secs(10), || async {
        app.redis_available(1).await == Some(N as i64 - confirmed)
    })
    .await;
    app.finish_drained_and_conserved(1).await;
}

/// Out of order: the consumer is stopped, the buyer reserves and cancels, then
/// the consumer starts → RELEASED, stock back where it started, never negative.
#[tokio::test]
async fn a_cancel_before_the_consumer_applied_the_deduction_is_conserved() {
    let mut app = TestApp::spawn_with_sku(1, 3, 3).await;
    app.stop_consumer().await;
    app.reserve_ok(1, "o", 1, 2).await;
    assert_eq!(app.ledger_rows().await, 0, "consumer is stopped");
    let (s, body) = app.cancel(1, "o").await;
    assert_eq!((s, body["status"].as_str()), (200, Some("RELEASED")));
    assert_eq!(app.mysql_available(1).await, Some(3));
    app.start_consumer();
    app.wait_drained(1).await;
    assert_eq!(app.ledger_status(1, "o").await.as_deref(), Some("RELEASED"));
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.mysql_available(1).await, Some(3));
    assert_eq!(app.redis_available(1).await, Some(3));
    app.finish_conserved(1).await;
}
