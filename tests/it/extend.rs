//! The hold while the buyer pays: `POST .../extend` (contract §5, "Extending
//! the time to pay"). MySQL decides under the row lock; the Redis record
//! mirrors the new time; the delay queue and the sweep honour it; an
//! extension racing the expiry has one winner; an extension MySQL lost in a
//! failover is re-applied from the Redis mirror instead of releasing the unit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde_json::Value;

use stockd::domain::{Deduction, RequestId, UserId};
use stockd::roles::closer::Closer;

use crate::helpers::{TestApp, TestOptions};

fn extend_path(sku: u64, rid: &str) -> String {
    format!("/v1/skus/{sku}/reservations/{rid}/extend")
}

/// `ttl_secs` to pay, `extend_secs` per extension, `max` extensions.
fn options(ttl_secs: u64, extend_secs: u64, max: u32, closer: bool) -> TestOptions {
    TestOptions {
        ttl_secs,
        closer,
        tweak: Some(Arc::new(move |s| {
            s.reservation.extend_secs = extend_secs;
            s.reservation.max_extensions = max;
            s.closer.grace_ms = 0;
        })),
        ..TestOptions::default()
    }
}

/// MySQL's `(status, expires_at_ms, extensions)` of one ledger row.
async fn row_of(app: &TestApp, sku: u64, rid: &str) -> (String, u64, u32) {
    let mut db = app.mysql().await;
    db.exec_first(
        "SELECT status, expires_at_ms, extensions FROM stock_deduct_idempotent
         WHERE sku_id = ? AND deduct_request_id = ?",
        (sku, rid),
    )
    .await
    .unwrap()
    .expect("ledger row")
}

/// The Redis record's `expires_ms`.
async fn redis_expires(app: &TestApp, sku: u64, rid: &str) -> u64 {
    let record = app
        .res
        .redis
        .reservations()
        .reservation(TestApp::sku(sku), &RequestId::parse(rid).unwrap())
        .await
        .unwrap()
        .expect("Redis record");
    record.expires_at_ms
}

fn expiry_message(sku: u64, rid: &str, user: u64, count: u32) -> Deduction {
    Deduction {
        request_id: RequestId::parse(rid).unwrap(),
        sku_id: TestApp::sku(sku),
        user_id: UserId::new(user).unwrap(),
        count,
        created_ms: 0,
        expires_ms: 0,
        order: None,
        client: None,
    }
}

/// One extension moves `expires_at` by `extend_secs` in MySQL, in the Redis
/// record, in the answer, in `GET` and in a replay; the next is 409
/// `EXTENSION_LIMIT` and changes nothing.
#[tokio::test]
async fn an_extension_moves_the_time_to_pay_in_both_stores_and_only_max_times() {
    let app = TestApp::with(options(900, 300, 1, false)).await;
    app.create_sku(1, 5, 2).await;
    app.reserve_ok(1, "x", 7, 1).await;
    app.wait_ledger_rows(1).await;
    let (_, before, _) = row_of(&app, 1, "x").await;
    let (status, body) = app.post_json(&extend_path(1, "x")).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("RESERVED")));
    let after = before + 300_000;
    assert_eq!(row_of(&app, 1, "x").await, ("RESERVED".into(), after, 1));
    assert_eq!(redis_expires(&app, 1, "x").await, after);
    let expected = stockd::clock::rfc3339_ms(after);
    assert_eq!(body["expires_at"].as_str(), Some(expected.as_str()));
    let (_, read) = app.get_json("/v1/skus/1/reservations/x").await;
    assert_eq!(read["expires_at"], body["expires_at"]);
    let replay = app.reserve(1, "x", 7, 1).await;
    assert_eq!(replay.status(), 200);
    let replayed: Value = replay.json().await.unwrap();
    assert_eq!(replayed["expires_at"], body["expires_at"]);

    let (status, problem) = app.post_json(&extend_path(1, "x")).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("EXTENSION_LIMIT"))
    );
    assert_eq!(row_of(&app, 1, "x").await, ("RESERVED".into(), after, 1));
    assert_eq!(redis_expires(&app, 1, "x").await, after);
    app.finish_drained_and_conserved(1).await;
}

/// A final reservation is not extended: confirmed, cancelled, unknown, bad id.
#[tokio::test]
async fn a_final_or_unknown_reservation_is_not_extended() {
    let app = TestApp::spawn_with_sku(1, 5, 5).await;
    app.reserve_ok(1, "paid", 1, 1).await;
    app.reserve_ok(1, "gone", 1, 1).await;
    assert_eq!(app.confirm(1, "paid").await.0, 200);
    assert_eq!(app.cancel(1, "gone").await.0, 200);
    for (rid, status, code) in [
        ("paid", 409, "RESERVATION_CONFIRMED"),
        ("gone", 409, "RESERVATION_RELEASED"),
        ("nope", 404, "RESERVATION_NOT_FOUND"),
        ("bad%20id", 400, "INVALID_REQUEST"),
    ] {
        let (got, body) = app.post_json(&extend_path(1, rid)).await;
        assert_eq!((got, body["code"].as_str()), (status, Some(code)), "{rid}");
    }
    assert_eq!(row_of(&app, 1, "paid").await.2, 0);
    assert_eq!(row_of(&app, 1, "gone").await.2, 0);
    app.finish_drained_and_conserved(1).await;
}

/// The consumer is behind: the extension applies the deduction from the
/// Redis record first, then extends it; the late delivery is a duplicate.
#[tokio::test]
async fn an_extension_before_the_consumer_applies_the_reservation_first() {
    let mut app = TestApp::with(TestOptions {
        consumer: false,
        ..options(900, 60, 1, false)
    })
    .await;
    app.create_sku(1, 5, 2).await;
    app.reserve_ok(1, "early", 3, 2).await;
    let (status, _) = app.post_json(&extend_path(1, "early")).await;
    assert_eq!(status, 200);
    let (state, expires, extensions) = row_of(&app, 1, "early").await;
    assert_eq!((state.as_str(), extensions), ("RESERVED", 1));
    assert_eq!(redis_expires(&app, 1, "early").await, expires);
    app.start_consumer();
    app.wait_drained(1).await;
    assert_eq!(app.ledger_rows_of(1).await, 1);
    assert_eq!(app.mysql_available(1).await, Some(3));
    app.finish_conserved(1).await;
}

/// The delay queue honours the new time: with 2 s to pay and a 3 s
/// extension, the first delay message finds MySQL's later time and waits
/// again; the reservation is released only after the extended time.
#[tokio::test]
async fn an_extended_reservation_outlives_its_first_expiry_and_then_expires() {
    let app = TestApp::with(options(2, 3, 1, true)).await;
    app.create_sku(1, 3, 1).await;
    let started = Instant::now();
    app.reserve_ok(1, "late", 1, 1).await;
    assert_eq!(app.post_json(&extend_path(1, "late")).await.0, 200);
    // Past the first time to pay, with the delay message handled.
    app.eventually("first expiry deferred", Duration::from_secs(15), || async {
        app.metric_sum("stockd_closer_expiries_deferred_total")
            .await
            >= 1.0
    })
    .await;
    assert_eq!(row_of(&app, 1, "late").await.0, "RESERVED");
    app.eventually(
        "expired at the new time",
        Duration::from_secs(20),
        || async { app.ledger_status(1, "late").await.as_deref() == Some("RELEASED") },
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "released before the extended time"
    );
    app.eventually("Redis mirrored", Duration::from_secs(5), || async {
        app.redis_available(1).await == Some(3)
    })
    .await;
    app.finish_drained_and_conserved(1).await;
}

/// The sweep honours the new time too: past the first time it leaves an
/// extended reservation, re-applies an extension MySQL lost (the Redis
/// mirror holds the later time), and releases it once both say it is due.
#[tokio::test]
async fn the_sweep_releases_an_extended_reservation_only_after_its_new_time() {
    let app = TestApp::with(options(900, 60, 1, false)).await;
    app.create_sku(1, 3, 1).await;
    app.reserve_ok(1, "s", 1, 1).await;
    app.wait_ledger_rows(1).await;
    assert_eq!(app.post_json(&extend_path(1, "s")).await.0, 200);
    let closer = Closer::from_resources(&app.res);
    let now = stockd::clock::unix_ms();
    // The first time to pay is over (900 s ago), the extension's 60 s not.
    app.sql(&format!(
        "UPDATE stock_deduct_idempotent SET expires_at_ms = {} WHERE deduct_request_id = 's'",
        now + 30_000
    ))
    .await;
    assert_eq!(closer.sweep_once().await.unwrap().released, 0);
    assert_eq!(row_of(&app, 1, "s").await.0, "RESERVED");
    // MySQL's time is past while the Redis mirror holds the extended one:
    // an extension MySQL lost, which the sweep re-applies instead of releasing.
    let mirrored = redis_expires(&app, 1, "s").await;
    app.sql(
        "UPDATE stock_deduct_idempotent SET expires_at_ms = 1, extensions = 0
         WHERE deduct_request_id = 's'",
    )
    .await;
    assert_eq!(closer.sweep_once().await.unwrap().released, 0);
    assert_eq!(row_of(&app, 1, "s").await, ("RESERVED".into(), mirrored, 1));
    // Both stores agree the time is past: released.
    app.sql("UPDATE stock_deduct_idempotent SET expires_at_ms = 1 WHERE deduct_request_id = 's'")
        .await;
    let record = app
        .res
        .redis
        .keys()
        .reservation(TestApp::sku(1), &RequestId::parse("s").unwrap());
    app.redis_cmd(&["HSET", &record, "expires_ms", "1"]).await;
    assert_eq!(closer.sweep_once().await.unwrap().released, 1);
    assert_eq!(row_of(&app, 1, "s").await.0, "RELEASED");
    app.finish_drained_and_conserved(1).await;
}

/// Extension racing expiry, 100 times past the time to pay: each pair has
/// one winner in MySQL — 200 and the row still reserved with the moved time,
/// or 409 `RESERVATION_RELEASED` and the row released — and both stores
/// hold exactly the reservations the extensions won.
#[tokio::test]
async fn extension_racing_expiry_has_exactly_one_winner_each() {
    const N: u64 = 100;
    let app = TestApp::with(options(1, 60, 1, false)).await;
    app.create_sku(1, N as i64, 1).await;
    for i in 0..N {
        assert_eq!(
            app.reserve(1, &format!("r{i}"), i + 1, 1).await.status(),
            201
        );
    }
    let expires_by = Instant::now() + Duration::from_secs(1);
    app.wait_ledger_rows(N).await;
    tokio::time::sleep_until((expires_by + Duration::from_millis(5)).into()).await;
    let closer = Closer::from_resources(&app.res);
    let races = (0..N).map(|i| {
        let (app, closer) = (&app, &closer);
        async move {
            let rid = format!("r{i}");
            let msg = expiry_message(1, &rid, i + 1, 1);
            let path = extend_path(1, &rid);
            let ((status, body), expired) = tokio::join!(app.post_json(&path), closer.expire(&msg));
            assert!(expired.is_ok());
            let (state, _, extensions) = row_of(app, 1, &rid).await;
            match status {
                200 => assert_eq!((state.as_str(), extensions), ("RESERVED", 1), "{rid}"),
                409 => {
                    assert_eq!(body["code"], "RESERVATION_RELEASED", "{rid}");
                    assert_eq!((state.as_str(), extensions), ("RELEASED", 0), "{rid}");
                }
                other => panic!("{rid}: extend answered {other} {body}"),
            }
            status == 200
        }
    });
    let won = futures_util::future::join_all(races)
        .await
        .into_iter()
        .filter(|&extended| extended)
        .count() as i64;
    app.wait_drained(1).await;
    assert_eq!(app.mysql_available(1).await, Some(N as i64 - won));
    app.eventually("Redis mirrored", Duration::from_secs(5), || async {
        app.redis_available(1).await == Some(N as i64 - won)
    })
    .await;
    app.finish_conserved(1).await;
}

/// MySQL lost the extension's commit (a failover to a lagging replica): the
/// row has its first, past time again, but the Redis mirror — written only
/// after the commit — proves the extension. The expiry re-applies it and the
/// unit stays held.
#[tokio::test]
async fn an_extension_mysql_lost_is_reapplied_from_the_redis_mirror() {
    let app = TestApp::with(options(900, 60, 1, false)).await;
    app.create_sku(1, 3, 1).await;
    app.reserve_ok(1, "kept", 4, 1).await;
    app.wait_ledger_rows(1).await;
    assert_eq!(app.post_json(&extend_path(1, "kept")).await.0, 200);
    let mirrored = redis_expires(&app, 1, "kept").await;
    app.sql(
        "UPDATE stock_deduct_idempotent SET expires_at_ms = 1, extensions = 0
         WHERE deduct_request_id = 'kept'",
    )
    .await;
    let closer = Closer::from_resources(&app.res);
    closer
        .expire(&expiry_message(1, "kept", 4, 1))
        .await
        .unwrap();
    assert_eq!(
        row_of(&app, 1, "kept").await,
        ("RESERVED".into(), mirrored, 1)
    );
    assert_eq!(app.mysql_available(1).await, Some(2));
    app.finish_drained_and_conserved(1).await;
}
