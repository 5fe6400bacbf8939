//! Events when a confirm or cancel outruns the consumer (issue 49): the
//! lifecycle applies the deduction it finds only in Redis first, and what it
//! tells must be what the consumer would have told — the SKU's crossings
//! included — while the consumer's late duplicate tells nothing new: one
//! `id`, one body. Deterministic: the consumer is held until the lifecycle
//! has decided.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::events::EventTap;
use crate::helpers::http::order_body;
use crate::helpers::{poll_until_steady, TestApp, TestOptions};

/// How long the events may take to arrive (relay passes, a busy machine).
const ARRIVAL: Duration = Duration::from_secs(30);

/// Each id's bodies as received: a subscriber deduplicating by id must never
/// see two different `type`, `subject` or `data` under one id.
pub(crate) fn bodies_by_id(events: &[Value]) -> BTreeMap<String, Vec<Value>> {
    let mut by_id: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in events {
        let body = json!({"type": e["type"], "subject": e["subject"], "data": e["data"]});
        let seen = by_id
            .entry(e["id"].as_str().unwrap().to_string())
            .or_default();
        if !seen.contains(&body) {
            seen.push(body);
        }
    }
    by_id
}

/// Ids told with more than one body.
pub(crate) fn two_bodied(events: &[Value]) -> Vec<(String, Vec<Value>)> {
    bodies_by_id(events)
        .into_iter()
        .filter(|(_, bodies)| bodies.len() > 1)
        .collect()
}

fn types_of(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

/// Two buyers take the last two units; the order service confirms the first
/// and cancels the second before the consumer applied either. MySQL's
/// available goes 2 → 1 → 0 → 1, as with the consumer first: `sold_out` and
/// `back_in_stock` are told, and no id carries two bodies once the
/// consumer's late duplicates are told again.
#[tokio::test]
async fn a_confirm_and_a_cancel_before_the_consumer_tell_the_crossings_once() {
    let mut app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 2, 1).await;
    let tap = EventTap::bind(&app, "#").await;
    app.reserve_ok(1, "race-a", 1, 1).await;
    app.reserve_ok(1, "race-b", 2, 1).await;
    assert_eq!(app.confirm(1, "race-a").await.0, 200);
    assert_eq!(app.cancel(1, "race-b").await.0, 200);
    app.start_consumer();
    app.wait_drained(1).await;
    let settled = poll_until_steady(ARRIVAL, || async {
        let types = types_of(&tap.events());
        types.iter().any(|t| t == "stockd.sku.back_in_stock")
            && types
                .iter()
                .filter(|t| *t == "stockd.reservation.persisted")
                .count()
                >= 4
    })
    .await;
    let events = tap.events();
    let types = types_of(&events);
    assert!(settled, "{types:?}");
    for kind in ["stockd.sku.sold_out", "stockd.sku.back_in_stock"] {
        assert_eq!(
            types.iter().filter(|t| *t == kind).count(),
            1,
            "{kind} once: {types:?}"
        );
    }
    assert_eq!(two_bodied(&events), vec![], "one id, one body");
    tap.close().await;
    app.finish_drained_and_conserved(1).await;
}

/// The same race for an order of two lines: placed, then confirmed before
/// the consumer applied it, then another buyer takes SKU 1's last unit; the
/// consumer's duplicate of the order tells its `persisted` again with the
/// first telling's body (SKU 1's available as the order left it, not as
/// the later reservation did).
#[tokio::test]
async fn an_order_confirmed_before_the_consumer_is_told_with_one_body_per_id() {
    let mut app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 2, 2).await;
    app.create_sku(2, 1, 1).await;
    let tap = EventTap::bind(&app, "#").await;
    let order = order_body("race-o", 1, &[(1, 1), (2, 1)]);
    let (status, body) = app.place_order(&order).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = app.post_json("/v1/orders/race-o/confirm").await;
    assert_eq!(status, 200, "{body}");
    app.reserve_ok(1, "race-late", 2, 1).await;
    app.start_consumer();
    app.wait_drained(1).await;
    app.wait_drained(2).await;
    let settled = poll_until_steady(ARRIVAL, || async {
        let types = types_of(&tap.events());
        types.iter().any(|t| t == "stockd.order.confirmed")
            && types.iter().filter(|t| *t == "stockd.sku.sold_out").count() >= 2
            && types.iter().any(|t| t == "stockd.order.persisted")
    })
    .await;
    let events = tap.events();
    assert!(settled, "{:?}", types_of(&events));
    assert_eq!(two_bodied(&events), vec![], "one id, one body");
    for persisted in events
        .iter()
        .filter(|e| e["type"] == "stockd.order.persisted")
    {
        let lines = persisted["data"]["lines"].as_array().unwrap();
        let first = lines.iter().find(|l| l["sku_id"] == 1).unwrap();
        assert_eq!(
            first["available"], 1,
            "as the order left SKU 1: {persisted}"
        );
    }
    tap.close().await;
    app.finish_drained_and_conserved(1).await;
}
