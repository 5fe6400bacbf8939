//! Events out (docs/operations.md, "Events"): one CloudEvent per committed
//! transition, of the right type, none for a refusal or a replay; ids stable
//! across a republish of the outbox and across a redelivered deduction; every
//! message parsed by the CloudEvents SDK and valid against docs/asyncapi.json.

use std::collections::BTreeMap;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::json;

use crate::helpers::events::EventTap;
use crate::helpers::{poll_until_steady, TestApp, TestOptions};

/// How long the events of a few transitions may take to arrive (relay pass
/// of 100 ms, the closer's expiry after `ttl_secs` + grace, a busy machine).
const ARRIVAL: Duration = Duration::from_secs(30);

/// The expected count of each event type, as `count_by_type` gives it.
fn want(counts: &[(&str, usize)]) -> BTreeMap<String, usize> {
    counts.iter().map(|&(k, n)| (k.to_string(), n)).collect()
}

fn count_by_type(pairs: &[(String, String)]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (kind, _) in pairs {
        *counts.entry(kind.clone()).or_insert(0) += 1;
    }
    counts
}

/// A sale of three units told event by event: created, three reserved and
/// persisted, sold out, a refusal (nothing), a replay (nothing), a confirm, a
/// cancel (released + back in stock), an expiry (released), an adjustment.
/// Every id is unique, every message passes the SDK and the AsyncAPI schemas,
/// and a republish of the whole event outbox repeats the same ids.
#[tokio::test]
async fn every_committed_transition_is_one_event_and_a_refusal_is_none() {
    let app = TestApp::with(TestOptions {
        closer: true,
        ttl_secs: 3,
        ..TestOptions::default()
    })
    .await;
    let tap = EventTap::bind(&app, "#").await;

    app.create_sku(1, 3, 5).await;
    for (rid, user) in [("ev-a", 1), ("ev-b", 2), ("ev-c", 3)] {
        app.reserve_ok(1, rid, user, 1).await;
    }
    assert_eq!(
        app.reserve(1, "ev-d", 4, 1).await.status(),
        409,
        "sold out: a refusal"
    );
    assert_eq!(app.reserve(1, "ev-c", 3, 1).await.status(), 200, "a replay");
    app.wait_ledger_rows(3).await;
    assert_eq!(app.confirm(1, "ev-a").await.0, 200);
    assert_eq!(app.cancel(1, "ev-b").await.0, 200);
    let (status, body) = app
        .adjust(
            1,
            &json!({"delta": 2, "reason": "found in the back", "reference": "po-7"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");

    let expected = want(&[
        ("stockd.sku.adjusted", 2),
        ("stockd.reservation.reserved", 3),
        ("stockd.reservation.persisted", 3),
        ("stockd.sku.sold_out", 1),
        ("stockd.reservation.confirmed", 1),
        ("stockd.reservation.released", 2),
        ("stockd.sku.back_in_stock", 1),
    ]);
    let arrived = poll_until_steady(ARRIVAL, || async {
        count_by_type(&tap.kinds_and_ids()) == expected
    })
    .await;
    let first = tap.kinds_and_ids();
    assert!(
        arrived,
        "events by type: {:?}\nwant {expected:?}",
        count_by_type(&first)
    );
    let mut ids: Vec<&String> = first.iter().map(|(_, id)| id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        first.len(),
        "each change has an id of its own: {first:?}"
    );
    for rid in ["ev-a", "ev-b", "ev-c"] {
        let id = format!("skus/1/reservations/{rid}#reserved");
        assert!(first.iter().any(|(_, i)| *i == id), "{id} missing");
    }
    assert!(
        !first.iter().any(|(_, id)| id.contains("ev-d")),
        "no event for a refusal"
    );
    let events = tap.events();
    let released: Vec<&str> = (events.iter())
        .filter(|e| e["type"] == "stockd.reservation.released")
        .map(|e| e["data"]["reason"].as_str().unwrap())
        .collect();
    assert!(
        released.contains(&"cancelled") && released.contains(&"expired"),
        "{released:?}"
    );
    let report = tap.check_with_sdk_and_asyncapi();
    assert!(report.contains(" 0 errors"), "{report}");

    // The outbox republished whole (a relay whose commit was lost): the
    // same MySQL-decided events arrive again under the same ids.
    let mut db = app.mysql().await;
    db.query_drop("UPDATE event_outbox SET published_at_ms = NULL")
        .await
        .unwrap();
    let staged: u64 = db
        .query_first("SELECT COUNT(*) FROM event_outbox")
        .await
        .unwrap()
        .unwrap();
    let before = first.len();
    let again = poll_until_steady(ARRIVAL, || async {
        tap.kinds_and_ids().len() == before + staged as usize
    })
    .await;
    let all = tap.kinds_and_ids();
    assert!(
        again,
        "{} events after the republish, want {}",
        all.len(),
        before + staged as usize
    );
    for pair in &all[before..] {
        assert!(
            first.contains(pair),
            "a republished event got a new id: {pair:?}"
        );
    }
    tap.close().await;
    app.finish_drained_and_conserved(1).await;
}

/// A deduction delivered again (a consumer that died between its commit and
/// the publish of the batch's events, a relay republish) is applied once
/// and told again with the same id: the redelivery is how a `persisted`
/// event the dead consumer never published still gets out.
#[tokio::test]
async fn a_redelivered_deduction_is_applied_once_and_told_again_with_the_same_id() {
    let app = TestApp::spawn_with_sku(1, 5, 5).await;
    let tap = EventTap::bind(&app, "stockd.reservation.persisted").await;
    app.reserve_ok(1, "dup-1", 1, 1).await;
    app.wait_ledger_rows(1).await;
    let id = "skus/1/reservations/dup-1#persisted";
    let told = poll_until_steady(ARRIVAL, || async { tap.kinds_and_ids().len() == 1 }).await;
    assert!(told, "{:?}", tap.kinds_and_ids());
    assert_eq!(tap.kinds_and_ids()[0].1, id);
    let msg = stockd::domain::Deduction {
        request_id: stockd::domain::RequestId::parse("dup-1").unwrap(),
        sku_id: TestApp::sku(1),
        user_id: stockd::domain::UserId::new(1).unwrap(),
        count: 1,
        created_ms: 1,
        expires_ms: 2,
        order: None,
        client: None,
    };
    let report = stockd::db::ledger::apply_batch(&app.res.db, &[msg.clone(), msg], 0)
        .await
        .unwrap();
    assert_eq!((report.applied, report.duplicates), (0, 2));
    let retold: Vec<&str> = report.told.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(retold, [id], "told again, once, under the first id");
    assert_eq!(report.told[0].data.to_json()["status"], "RESERVED");
    let mut db = app.mysql().await;
    let staged: u64 = db
        .query_first("SELECT COUNT(*) FROM event_outbox WHERE type LIKE 'stockd.reservation.%'")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        staged, 0,
        "the consumer's events go out through its own path, not the outbox table"
    );
    tap.close().await;
    app.finish_drained_and_conserved(1).await;
}

/// `events.enabled: false` stages and publishes nothing, and `GET /asyncapi.json` serves
/// the checked-in document without a token.
#[tokio::test]
async fn events_off_stage_nothing_and_the_asyncapi_document_is_served() {
    let app = TestApp::with(TestOptions {
        tweak: Some(std::sync::Arc::new(|s: &mut stockd::config::Settings| {
            s.events.enabled = false;
        })),
        ..TestOptions::default()
    })
    .await;
    let tap = EventTap::bind(&app, "#").await;
    app.create_sku(1, 2, 2).await;
    app.reserve_ok(1, "off-1", 1, 1).await;
    app.wait_ledger_rows(1).await;
    assert_eq!(app.cancel(1, "off-1").await.0, 200);
    // Nothing published either: not by the api, the consumer or the relay.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(tap.messages().len(), 0, "{:?}", tap.kinds_and_ids());
    tap.close().await;
    let mut db = app.mysql().await;
    let staged: u64 = db
        .query_first("SELECT COUNT(*) FROM event_outbox")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(staged, 0);
    let resp = app.get("/asyncapi.json").await;
    assert_eq!(resp.status(), 200);
    let doc: serde_json::Value = resp.json().await.unwrap();
    let file: serde_json::Value =
        serde_json::from_str(include_str!("../../docs/asyncapi.json")).unwrap();
    assert_eq!(doc, file);
    app.finish_drained_and_conserved(1).await;
}

/// A SKU with a low-stock threshold tells `low_stock` once on the way down
/// and `sold_out` (not `low_stock`) when it empties; the threshold is set and
/// answered by `PUT /v1/admin/skus/{id}`, and a bad one is a 400.
#[tokio::test]
async fn low_stock_is_told_once_on_the_way_down() {
    let app = TestApp::spawn().await;
    let tap = EventTap::bind(&app, "stockd.sku.*").await;
    let body = json!({"total_stock": 4, "limit_per_user": 4, "low_stock_threshold": -1});
    assert_eq!(app.put_sku_json(1, &body).await.0, 400);
    let body = json!({"total_stock": 4, "limit_per_user": 4, "low_stock_threshold": 2});
    let (status, sku) = app.put_sku_json(1, &body).await;
    assert_eq!(
        (status, &sku["low_stock_threshold"]),
        (200, &json!(2)),
        "{sku}"
    );
    for (i, user) in (1..=4).enumerate() {
        app.reserve_ok(1, &format!("low-{i}"), user, 1).await;
        app.wait_ledger_rows(i as u64 + 1).await;
    }
    let want = |kinds: &[(String, String)]| {
        let mut types: Vec<&str> = kinds.iter().map(|(k, _)| k.as_str()).collect();
        types.sort();
        types
            == [
                "stockd.sku.adjusted",
                "stockd.sku.low_stock",
                "stockd.sku.sold_out",
            ]
    };
    let arrived = poll_until_steady(ARRIVAL, || async { want(&tap.kinds_and_ids()) }).await;
    assert!(arrived, "{:?}", tap.kinds_and_ids());
    let low = (tap.events().into_iter())
        .find(|e| e["type"] == "stockd.sku.low_stock")
        .unwrap();
    assert_eq!(
        (
            low["data"]["available"].as_i64(),
            low["data"]["threshold"].as_i64()
        ),
        (Some(2), Some(2))
    );
    tap.close().await;
    app.finish_drained_and_conserved(1).await;
}

/// A split SKU (3 buckets): each admitted reservation is told `reserved`
/// by the bucket that took it and `persisted` once by MySQL; a refusal is
/// told nothing; the SKU's `sold_out` comes from MySQL's count, once.
#[tokio::test]
async fn a_split_sku_tells_each_reservation_once() {
    let app = TestApp::spawn().await;
    let tap = EventTap::bind(&app, "#").await;
    let body = json!({"total_stock": 6, "limit_per_user": 6, "buckets": 3});
    assert_eq!(app.put_sku_json(1, &body).await.0, 200);
    let mut taken = 0;
    for user in 1..=9u64 {
        let rid = format!("split-{user}");
        let mut status = app.reserve(1, &rid, user, 1).await.status().as_u16();
        // 503: stock moving between buckets; the same request id again.
        for _ in 0..50 {
            if status != 503 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            status = app.reserve(1, &rid, user, 1).await.status().as_u16();
        }
        assert!(matches!(status, 201 | 202 | 409), "{rid}: {status}");
        taken += usize::from(status != 409);
    }
    assert!((1..=6).contains(&taken), "{taken} taken of 6");
    app.wait_ledger_rows(taken as u64).await;
    let sold_out = usize::from(taken == 6);
    let want = |pairs: &[(String, String)]| {
        let counts = count_by_type(pairs);
        let n = |k: &str| counts.get(k).copied().unwrap_or(0);
        n("stockd.reservation.reserved") == taken
            && n("stockd.reservation.persisted") == taken
            && n("stockd.sku.sold_out") == sold_out
            && n("stockd.sku.adjusted") == 1
            && counts.len() == 3 + sold_out
    };
    let arrived = poll_until_steady(ARRIVAL, || async { want(&tap.kinds_and_ids()) }).await;
    assert!(arrived, "{:?}", count_by_type(&tap.kinds_and_ids()));
    let report = tap.check_with_sdk_and_asyncapi();
    assert!(report.contains(" 0 errors"), "{report}");
    tap.close().await;
    app.finish_drained_and_conserved(1).await;
}

/// An order is told once per change for all its lines (`stockd.order.*`),
/// never as reservation events: reserved and persisted for an order MySQL
/// applied, then confirmed; reserved and rejected for an order MySQL could
/// not cover (SKU 2 short in MySQL, as after Redis lost writes), naming the
/// SKU and why; reserved, persisted and released for a cancelled one. A
/// redelivered order is told again from its row under the same id. Every
/// message valid against the AsyncAPI document.
#[tokio::test]
async fn an_order_is_told_once_per_change_and_a_rejected_one_names_why() {
    let app = TestApp::with(TestOptions::default()).await;
    let tap = EventTap::bind(&app, "#").await;
    for sku in 1..=3 {
        app.create_sku(sku, 5, 5).await;
    }
    let place = |order_id: &'static str, user: u64, skus: [u64; 2]| {
        let app = &app;
        async move {
            let body = json!({"order_id": order_id, "user_id": user, "lines": [
                {"sku_id": skus[0], "count": 1}, {"sku_id": skus[1], "count": 2}]});
            let resp = app
                .client
                .post(format!("{}/v1/orders", app.base))
                .json(&body);
            assert_eq!(resp.send().await.unwrap().status(), 201, "{order_id}");
        }
    };
    let post = |path: String| {
        let app = &app;
        async move {
            let resp = app.client.post(format!("{}{path}", app.base)).send();
            assert_eq!(resp.await.unwrap().status(), 200, "{path}");
        }
    };
    place("ev-o1", 1, [1, 2]).await;
    app.wait_drained(1).await;
    post("/v1/orders/ev-o1/confirm".to_string()).await;
    let mut db = app.mysql().await;
    db.exec_drop(
        "UPDATE sku_stock SET available_stock = 0 WHERE sku_id = ?",
        (TestApp::sku(2).get(),),
    )
    .await
    .unwrap();
    drop(db);
    place("ev-o2", 2, [1, 2]).await;
    place("ev-o3", 3, [1, 3]).await;
    app.wait_drained(1).await;
    post("/v1/orders/ev-o3/cancel".to_string()).await;

    let expected = want(&[
        ("stockd.order.reserved", 3),
        ("stockd.order.persisted", 2),
        ("stockd.order.confirmed", 1),
        ("stockd.order.rejected", 1),
        ("stockd.order.released", 1),
    ]);
    let orders_only = |pairs: &[(String, String)]| {
        let counts = count_by_type(pairs);
        counts
            .into_iter()
            .filter(|(k, _)| !k.starts_with("stockd.sku."))
            .collect::<BTreeMap<_, _>>()
    };
    let arrived = poll_until_steady(ARRIVAL, || async {
        orders_only(&tap.kinds_and_ids()) == expected
    })
    .await;
    assert!(arrived, "{:?}", count_by_type(&tap.kinds_and_ids()));
    let events = tap.events();
    let one = |kind: &str, order_id: &str| {
        let found: Vec<&serde_json::Value> = (events.iter())
            .filter(|e| e["type"] == kind && e["data"]["order_id"] == order_id)
            .collect();
        assert_eq!(found.len(), 1, "{kind} of {order_id}: {found:?}");
        found[0].clone()
    };
    let (s1, s2, s3) = (
        TestApp::sku(1).get(),
        TestApp::sku(2).get(),
        TestApp::sku(3).get(),
    );
    let persisted = one("stockd.order.persisted", "ev-o1");
    assert_eq!(persisted["id"], "orders/ev-o1#persisted");
    assert_eq!(persisted["subject"], "orders/ev-o1");
    assert_eq!(
        persisted["data"]["lines"],
        json!([{"sku_id": s1, "count": 1, "available": 4},
               {"sku_id": s2, "count": 2, "available": 3}])
    );
    let rejected = one("stockd.order.rejected", "ev-o2");
    assert_eq!(
        (
            &rejected["data"]["reason"],
            &rejected["data"]["failed_sku_id"]
        ),
        (&json!("over_admitted"), &json!(s2))
    );
    assert_eq!(rejected["data"]["lines"].as_array().unwrap().len(), 2);
    let released = one("stockd.order.released", "ev-o3");
    assert_eq!(released["data"]["reason"], "cancelled");
    assert_eq!(released["data"]["lines"][1]["sku_id"], json!(s3));
    assert_eq!(
        one("stockd.order.confirmed", "ev-o1")["data"]["status"],
        "CONFIRMED"
    );
    let report = tap.check_with_sdk_and_asyncapi();
    assert!(report.contains(" 0 errors"), "{report}");

    // A redelivery of an applied order and of a rejected one: told again
    // from the order rows, under the first ids.
    for (order_id, parts, told) in [
        ("ev-o1", [(1, 1), (2, 2)], "orders/ev-o1#persisted"),
        ("ev-o2", [(1, 1), (2, 2)], "orders/ev-o2#rejected"),
    ] {
        let lines = TestApp::order_lines(&parts);
        let order_id = stockd::domain::RequestId::parse(order_id).unwrap();
        let buyer = stockd::domain::UserId::new(9).unwrap();
        let msgs = stockd::domain::Deduction::of_order(&order_id, buyer, &lines, 1, 2);
        let report = stockd::db::ledger::apply_batch(&app.res.db, &msgs[..1], 0)
            .await
            .unwrap();
        assert_eq!((report.applied, report.duplicates), (0, 2));
        let retold: Vec<&str> = report.told.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(retold, [told]);
    }
    tap.close().await;
    app.cleanup().await;
}

/// An order the api held but never published (it died after the hold):
/// the relay publishes its one outbox entry, and its `reserved` event tells
/// every line once, with the available its hold left (kept in the entry:
/// the body the api would have told, issue 49).
#[tokio::test]
async fn the_relay_tells_an_order_it_republishes_whole() {
    let app = TestApp::with(TestOptions {
        tweak: Some(std::sync::Arc::new(|s: &mut stockd::config::Settings| {
            s.relay.idle_ms = 300;
        })),
        ..TestOptions::default()
    })
    .await;
    let tap = EventTap::bind(&app, "stockd.order.#").await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let order_id = stockd::domain::RequestId::parse("ev-relay").unwrap();
    let lines = TestApp::order_lines(&[(1, 1), (2, 1)]);
    let buyer = stockd::domain::UserId::new(4).unwrap();
    // As the api holds it (one script, or line by line on a Redis Cluster),
    // without its publish.
    let held = stockd::ops::order_saga::place(
        &app.res.redis,
        &order_id,
        buyer,
        &lines,
        5_000,
        &stockd::domain::Requester::Anyone,
        false,
    )
    .await;
    assert!(
        matches!(
            held,
            Ok(stockd::redis::orders::OrderOutcome::Reserved { .. })
        ),
        "{held:?}"
    );
    let expected = want(&[("stockd.order.reserved", 1), ("stockd.order.persisted", 1)]);
    let arrived = poll_until_steady(ARRIVAL, || async {
        count_by_type(&tap.kinds_and_ids()) == expected
    })
    .await;
    assert!(arrived, "{:?}", tap.kinds_and_ids());
    let reserved = (tap.events().into_iter())
        .find(|e| e["type"] == "stockd.order.reserved")
        .unwrap();
    assert_eq!(
        reserved["data"]["lines"],
        json!([{"sku_id": TestApp::sku(1).get(), "count": 1, "available": 4},
               {"sku_id": TestApp::sku(2).get(), "count": 1, "available": 4}])
    );
    let report = tap.check_with_sdk_and_asyncapi();
    assert!(report.contains(" 0 errors"), "{report}");
    tap.close().await;
    app.wait_drained(1).await;
    app.cleanup().await;
}
