//! Stages 2 and 3: the broker hand-off, the relay, and the batched consumer.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use serde_json::Value;

use stockd::db::ledger;
use stockd::domain::Deduction;
use stockd::domain::{OutboxPlace, RequestId, Requester, UserId};
use stockd::mq::message;

use crate::helpers::{TestApp, TestOptions};

fn message(sku: u64, rid: &str, user: u64, count: u32) -> Deduction {
    Deduction {
        request_id: RequestId::parse(rid).unwrap(),
        sku_id: TestApp::sku(sku),
        user_id: UserId::new(user).unwrap(),
        count,
        created_ms: 1,
        expires_ms: u64::MAX / 4,
        order: None,
        client: None,
    }
}

/// The consumer's one step takes a batch of deductions (no broker, no sleep):
/// the same deduction twice in it is applied once.
#[tokio::test]
async fn the_consumer_step_applies_a_batch_of_deductions_once() {
    let app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    let consumer = stockd::roles::consumer::Consumer::from_resources(&app.res);
    let d = message(1, "step", 3, 2);
    let cancel = tokio_util::sync::CancellationToken::new();
    match consumer.apply_once(&[d.clone(), d], &cancel).await {
        stockd::roles::consumer::Applied::Committed(report) => assert_eq!(report.applied, 1),
        _ => panic!("the batch was not committed"),
    }
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.mysql_available(1).await, Some(8));
    app.cleanup().await;
}

/// The same deduction delivered twice (and in one batch twice) is applied once.
#[tokio::test]
async fn a_duplicate_delivery_is_applied_once() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let resp = app.reserve(1, "dup", 1, 2).await;
    assert_eq!(resp.status(), 201);
    app.wait_ledger_rows(1).await;
    // The broker redelivers the same message: publish its exact bytes again.
    let msg = Deduction {
        request_id: RequestId::parse("dup").unwrap(),
        sku_id: TestApp::sku(1),
        user_id: UserId::new(1).unwrap(),
        count: 2,
        created_ms: 1,
        expires_ms: u64::MAX / 4,
        order: None,
        client: None,
    };
    app.publish_raw(&message::to_bytes(&msg)).await;
    app.publish_raw(&message::to_bytes(&msg)).await;
    // And a batch that holds it twice, applied directly.
    let report = ledger::apply_batch(&app.res.db, &[msg.clone(), msg.clone()], 3)
        .await
        .unwrap();
    assert_eq!((report.applied, report.duplicates), (0, 2));
    app.wait_drained(1).await;
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.mysql_available(1).await, Some(8));
    app.finish_conserved(1).await;
}

/// Crash window: the script wrote the outbox entry but the api never published
/// it. The relay finds the idle entry and publishes it; it reaches MySQL.
#[tokio::test]
async fn the_relay_publishes_an_outbox_entry_that_was_never_published() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    // The "crash": run the script, then drop the outcome on the floor.
    let outcome = app
        .res
        .redis
        .reservations()
        .reserve(
            TestApp::sku(1),
            &RequestId::parse("lost").unwrap(),
            UserId::new(3).unwrap(),
            1,
            &Requester::Anyone,
        )
        .await
        .unwrap();
    assert_eq!(outcome.label(), "reserved");
    assert_eq!(
        app.res.redis.outbox().len(TestApp::sku(1)).await.unwrap(),
        1
    );
    app.wait_ledger_rows(1).await;
    assert_eq!(
        app.ledger_status(1, "lost").await.as_deref(),
        Some("RESERVED")
    );
    app.finish_drained_and_conserved(1).await;
}

/// Over-admission: Redis holds more than MySQL (lost deductions after a
/// failover). The rows that do not fit become REJECTED; MySQL never goes below 0.
#[tokio::test]
async fn rows_that_do_not_fit_mysql_are_rejected_and_stock_never_negative() {
    let app = TestApp::spawn_with_sku(1, 5, 1).await;
    // Redis "forgot" 3 deductions: it believes 8 are available.
    let mut conn = app.redis_conn().await;
    let key = app.res.redis.keys().sku(TestApp::sku(1));
    let _: () = deadpool_redis::redis::cmd("HSET")
        .arg(&key)
        .arg("available")
        .arg(8)
        .query_async(&mut conn)
        .await
        .unwrap();
    for user in 1..=8u64 {
        assert_eq!(
            app.reserve(1, &format!("u{user}"), user, 1).await.status(),
            201
        );
    }
    app.wait_ledger_rows(8).await;
    app.wait_drained(1).await;
    let by_status = app.ledger_by_status(1).await;
    assert_eq!(by_status.get("RESERVED"), Some(&(5, 5)));
    assert_eq!(by_status.get("REJECTED"), Some(&(3, 3)));
    assert_eq!(app.mysql_available(1).await, Some(0));
    let mut db = app.mysql().await;
    let reasons: Vec<String> = db
        .query("SELECT DISTINCT reason FROM stock_deduct_idempotent WHERE status = 'REJECTED'")
        .await
        .unwrap();
    assert_eq!(reasons, vec!["OVER_ADMITTED".to_string()]);
    // A rejected reservation is visible as such through the API.
    let rejected: Vec<String> = db
        .query("SELECT deduct_request_id FROM stock_deduct_idempotent WHERE status = 'REJECTED'")
        .await
        .unwrap();
    let (status, body) = app
        .get_json(&format!("/v1/skus/1/reservations/{}", rejected[0]))
        .await;
    assert_eq!((status, body["status"].as_str()), (200, Some("REJECTED")));
    drop(db);
    // Applying the over-admission directly: same outcome, never negative.
    let report = ledger::apply_batch(&app.res.db, &[message(1, "late", 99, 1)], 3)
        .await
        .unwrap();
    assert_eq!(report.rejected.len(), 1);
    assert_eq!(app.mysql_available(1).await, Some(0));
    app.cleanup().await;
}

/// A poison message goes to the dead-letter queue and does not block others.
#[tokio::test]
async fn a_poison_message_is_dead_lettered_without_blocking_others() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.publish_raw(b"{not a deduction").await;
    app.publish_raw(
        br#"{"request_id":"a b","sku_id":1,"user_id":1,"count":1,"created_ms":1,"expires_ms":2}"#,
    )
    .await;
    app.reserve_ok(1, "fine", 1, 1).await;
    app.wait_ledger_rows(1).await;
    let dlq = app.res.publisher.topology().deduct_dlq.clone();
    app.eventually(
        "two messages dead-lettered",
        Duration::from_secs(20),
        || async { app.queue_depth(&dlq).await == 2 },
    )
    .await;
    app.finish_drained_and_conserved(1).await;
}

/// A message for a SKU MySQL does not know is rejected, not retried forever.
#[tokio::test]
async fn a_deduction_for_an_unknown_sku_is_rejected() {
    let app = TestApp::spawn().await;
    let report = ledger::apply_batch(&app.res.db, &[message(42, "x", 1, 1)], 3)
        .await
        .unwrap();
    assert_eq!(report.rejected.len(), 1);
    assert_eq!(report.rejected[0].1, "UNKNOWN_SKU");
    app.cleanup().await;
}

/// Oversell under concurrency: stock 100, limit 1, 2,000 concurrent requests from
/// 700 users → exactly 100 reserved by 100 distinct users; after the drain MySQL
/// available 0, 100 live units in the ledger, Redis 0 (contract §10: 1, 2, 3, 4, 6, 7).
#[tokio::test]
async fn no_oversell_under_two_thousand_concurrent_requests() {
    let app = TestApp::with(TestOptions::default()).await;
    app.create_sku(1, 100, 1).await;
    let results: Vec<(u64, String, u16, Value)> = futures_util::stream::iter(0..2000u64)
        .map(|i| {
            let app = &app;
            async move {
                let user = i % 700 + 1;
                let rid = format!("req-{i}");
                let resp = app.reserve(1, &rid, user, 1).await;
                let status = resp.status().as_u16();
                let body: Value = resp.json().await.unwrap_or(Value::Null);
                (user, rid, status, body)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut by_status: HashMap<u16, usize> = HashMap::new();
    for (_, _, status, _) in &results {
        *by_status.entry(*status).or_default() += 1;
    }
    let winners: Vec<&(u64, String, u16, Value)> = results
        .iter()
        .filter(|r| r.2 == 201 || r.2 == 202)
        .collect();
    assert_eq!(winners.len(), 100, "statuses: {by_status:?}");
    let users: HashSet<u64> = winners.iter().map(|r| r.0).collect();
    assert_eq!(users.len(), 100, "invariant 6: one unit per user");
    for (_, _, status, body) in &results {
        if *status == 409 {
            let code = body["code"].as_str().unwrap();
            assert!(code == "SOLD_OUT" || code == "LIMIT_EXCEEDED", "{code}");
        } else {
            assert!([201, 202].contains(status), "unexpected {status}: {body}");
        }
    }
    app.wait_ledger_rows(100).await;
    app.wait_drained(1).await;
    // Invariant 4: every 201/202 is in MySQL, live.
    for (_, rid, _, _) in &winners {
        assert_eq!(
            app.ledger_status(1, rid).await.as_deref(),
            Some("RESERVED"),
            "{rid}"
        );
    }
    assert_eq!(app.ledger_rows().await, 100, "invariant 3: applied once");
    assert_eq!(app.mysql_available(1).await, Some(0));
    assert_eq!(app.redis_available(1).await, Some(0));
    let mut db = app.mysql().await;
    let max_per_user: Option<i64> = db
        .query_first(
            "SELECT CAST(MAX(n) AS SIGNED) FROM (SELECT SUM(deduct_count) n FROM stock_deduct_idempotent
             WHERE status IN ('RESERVED','CONFIRMED') GROUP BY user_id) t",
        )
        .await
        .unwrap();
    assert_eq!(max_per_user, Some(1));
    drop(db);
    app.finish_conserved(1).await;
}

/// `amqp.urls`: a broker that refuses connections comes first in the list; the
/// api's publisher and the consumer both skip it and reach the next node, and a
/// reservation goes all the way to MySQL.
#[tokio::test]
async fn a_dead_broker_first_in_amqp_urls_is_skipped() {
    let dead_port = crate::ports::free_port();
    let app = TestApp::with(TestOptions {
        tweak: Some(std::sync::Arc::new(move |s| {
            let live = s.amqp.url.clone();
            let dead = live.replacen("@127.0.0.1:5672", &format!("@127.0.0.1:{dead_port}"), 1);
            assert_ne!(dead, live, "the test URL names 127.0.0.1:5672");
            // `url` is ignored once `urls` is set: point it at the dead node too,
            // so a role that still read `url` could not reach any broker.
            s.amqp.url = dead.clone();
            s.amqp.urls = vec![dead, live];
        })),
        ..TestOptions::default()
    })
    .await;
    assert_eq!(app.res.settings.amqp.broker_urls().len(), 2);
    app.create_sku(1, 10, 5).await;
    let resp = app.reserve(1, "via-second", 3, 1).await;
    assert_eq!(resp.status().as_u16(), 201, "{:?}", resp.text().await);
    app.wait_ledger_rows(1).await;
    assert_eq!(
        app.ledger_status(1, "via-second").await.as_deref(),
        Some("RESERVED")
    );
    app.finish_drained_and_conserved(1).await;
}

/// The group commit's linger: deductions that reach it within the linger of
/// the first leave as one broker message (without it, each one that finds a
/// free confirm slot leaves alone).
#[tokio::test]
async fn deductions_within_the_linger_leave_as_one_broker_message() {
    use stockd::outbox::group::GroupShape;
    use stockd::outbox::{GroupCommit, OutboxAcker};
    use stockd::redis::OutboxStream;

    // No consumer yet: the queue must keep what arrives, to be counted.
    let app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let (acker, acker_task) = OutboxAcker::spawn(app.res.redis.clone(), cancel.child_token());
    let shape = GroupShape {
        max: 100,
        in_flight: 1,
        linger: Duration::from_millis(300),
    };
    let (group, group_task) = GroupCommit::spawn(
        app.res.publisher.clone(),
        acker,
        shape,
        Default::default(),
        cancel.child_token(),
    );
    let queue = app.res.publisher.topology().deduct_queue.clone();
    let mut published = Vec::new();
    for i in 0..10u64 {
        let group = group.clone();
        let stream = OutboxStream::of_sku(TestApp::sku(1));
        let msg = message(1, &format!("linger-{i}"), 100 + i, 1);
        published.push(tokio::spawn(async move {
            group
                .publish(stream, OutboxPlace::alone(format!("1-{i}")), msg)
                .await
        }));
        // Spread over ~50 ms: far apart for a broker confirm, well inside the linger.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for publish in published {
        publish.await.unwrap().expect("confirmed");
    }
    assert_eq!(
        app.queue_depth(&queue).await,
        1,
        "ten deductions within the linger, one message"
    );
    cancel.cancel();
    let _ = tokio::join!(acker_task, group_task);
    // The message was only to be counted: purge it, so the queues end empty.
    assert_eq!(app.purge_queue(&queue).await, 1);
    app.cleanup().await;
}
