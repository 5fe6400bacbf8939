//! Dead letters are visible and recoverable: `stockd dlq list|replay|drop` and
//! the admin routes. A replayed deduction is applied once however often it is
//! replayed; a SKU filter never loses the other SKUs' deductions.

use std::time::Duration;

use stockd::ops::dlq::{self, DlqFilter, DlqKind};

use crate::helpers::TestApp;

fn filter(sku: Option<u64>) -> DlqFilter {
    DlqFilter {
        kind: DlqKind::Deduct,
        sku: sku.map(TestApp::sku),
        max_messages: 100,
    }
}

async fn wait_work_queue_empty(app: &TestApp) {
    let queue = app.res.publisher.topology().deduct_queue.clone();
    app.eventually("work queue drained", Duration::from_secs(20), || {
        let queue = queue.clone();
        async move { app.queue_depth(&queue).await == 0 }
    })
    .await;
}

/// A deduction the consumer gave up on is listed with its reason and
/// attempts; replayed, the consumer applies it; replayed again (a duplicate),
/// the stock is still taken once.
#[tokio::test]
async fn a_replayed_dead_letter_is_applied_once_even_when_replayed_twice() {
    let mut app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_and_lose_the_message(1, "r1", 1, 2).await;
    let deduction = app.deduction_of(1, "r1").await;
    app.dead_letter(std::slice::from_ref(&deduction), "retries_exhausted", 6)
        .await;

    let listing = dlq::list(&app.res.publisher, filter(None), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(listing.messages_read, 1);
    let dead = &listing.deductions[0];
    assert_eq!(
        (
            dead.sku_id,
            dead.request_id.as_str(),
            dead.user_id,
            dead.count
        ),
        (1, "r1", 1, 2)
    );
    assert_eq!(
        (dead.reason.as_str(), dead.attempts),
        ("retries_exhausted", Some(6))
    );
    assert_eq!(dead.message_id.as_deref(), Some("r1"));
    assert_eq!(app.dlq_depth().await, 1, "listing returns what it read");
    // The admin route shows the same.
    let (status, body) = app.get_json_admin("/v1/admin/dlq?queue=deduct&sku=1").await;
    assert_eq!(status, 200);
    assert_eq!(body["deductions"][0]["request_id"], "r1");
    assert_eq!(body["deductions"][0]["reason"], "retries_exhausted");

    let report = dlq::replay(&app.res.publisher, filter(None), &mut |_| {})
        .await
        .unwrap();
    assert_eq!((report.deductions.len(), report.failed), (1, 0));
    assert_eq!(app.dlq_depth().await, 0);
    // Straight to the work queue: no second copy in the delay queue.
    let topology = app.res.publisher.topology().clone();
    assert_eq!(app.queue_depth(&topology.expiry_delay_queue).await, 1);
    assert_eq!(app.queue_depth(&topology.deduct_queue).await, 1);
    app.start_consumer();
    app.wait_ledger_rows(1).await;
    wait_work_queue_empty(&app).await;
    assert_eq!(app.mysql_available(1).await, Some(8));

    // The same dead letter again: a duplicate, replayed through the admin route.
    app.dead_letter(std::slice::from_ref(&deduction), "retries_exhausted", 6)
        .await;
    let (status, body) = app
        .post_json_admin("/v1/admin/dlq/replay?queue=deduct")
        .await;
    assert_eq!(status, 200);
    assert_eq!(body, serde_json::json!({"replayed": 1}));
    wait_work_queue_empty(&app).await;
    assert_eq!(app.dlq_depth().await, 0);
    assert_eq!(app.ledger_rows().await, 1);
    assert_eq!(app.ledger_by_status(1).await.get("RESERVED"), Some(&(1, 2)));
    assert_eq!(app.mysql_available(1).await, Some(8), "stock taken once");
    app.finish_drained_and_conserved(1).await;
}

/// One dead letter carrying deductions of two SKUs: `--sku 1` replays only
/// SKU 1's and puts SKU 2's back into the DLQ with its reason; the CLI then
/// replays SKU 2's.
#[tokio::test]
async fn a_sku_filter_replays_that_sku_and_leaves_the_others_dead_lettered() {
    let mut app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    app.reserve_and_lose_the_message(1, "one", 1, 1).await;
    app.reserve_and_lose_the_message(2, "two", 1, 3).await;
    let batch = vec![
        app.deduction_of(1, "one").await,
        app.deduction_of(2, "two").await,
    ];
    app.dead_letter(&batch, "retries_exhausted", 6).await;

    let report = dlq::replay(&app.res.publisher, filter(Some(1)), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(report.deductions.len(), 1);
    assert_eq!((report.returned, report.failed), (1, 0));
    let left = dlq::list(&app.res.publisher, filter(None), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(left.messages_read, 1);
    assert_eq!(left.deductions.len(), 1);
    assert_eq!(left.deductions[0].request_id, "two");
    assert_eq!(
        left.deductions[0].reason, "retries_exhausted",
        "headers kept"
    );
    assert_eq!(left.deductions[0].message_id.as_deref(), Some("two"));

    app.start_consumer();
    app.wait_ledger_rows(1).await;
    wait_work_queue_empty(&app).await;
    assert_eq!(
        app.ledger_status(1, "one").await.as_deref(),
        Some("RESERVED")
    );
    assert_eq!(app.ledger_status(2, "two").await, None);

    let run = app
        .stockd(&["dlq", "replay", "--sku", "2", "--json"], &[])
        .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["deductions"][0]["request_id"], "two");
    app.wait_ledger_rows(2).await;
    assert_eq!(app.dlq_depth().await, 0);
    assert_eq!(app.mysql_available(2).await, Some(7));
    app.cleanup().await;
}

/// `dlq drop` refuses without `--yes`; with it, the poison message is gone.
/// `dlq list --json` shows a poison message with the consumer's reason.
#[tokio::test]
async fn dropping_needs_yes_and_lists_show_poison_with_the_consumers_reason() {
    let app = TestApp::spawn().await;
    app.publish_raw(b"garbage").await;
    app.eventually("poison dead-lettered", Duration::from_secs(20), || async {
        app.dlq_depth().await == 1
    })
    .await;
    let run = app.stockd(&["dlq", "list", "--json"], &[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    let reason = json["poison"][0]["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("poison:"), "{reason}");
    assert_eq!(json["poison"][0]["body_preview"], "garbage");
    let refused = app.stockd(&["dlq", "drop"], &[]).await;
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("--yes"), "{refused:?}");
    assert_eq!(app.dlq_depth().await, 1);
    let dropped = app.stockd(&["dlq", "drop", "--yes"], &[]).await;
    assert_eq!(dropped.code, 0, "{dropped:?}");
    assert!(
        dropped.stdout.contains("dropped: deduct  POISON"),
        "{dropped:?}"
    );
    assert_eq!(app.dlq_depth().await, 0);
    let expiry = app
        .stockd(&["dlq", "list", "--queue", "expiry", "--json"], &[])
        .await;
    assert_eq!(expiry.code, 0, "{expiry:?}");
    assert_eq!(expiry.json()["messages_read"], 0);
    app.cleanup().await;
}

/// The admin routes need the admin token and refuse a bad filter with 400.
#[tokio::test]
async fn the_dlq_routes_need_the_token_and_a_valid_filter() {
    let app = TestApp::spawn().await;
    assert_eq!(app.get("/v1/admin/dlq").await.status(), 401);
    for bad in ["?sku=0", "?queue=other", "?sku=x", "?nope=1"] {
        let resp = app.get_admin(&format!("/v1/admin/dlq{bad}")).await;
        assert_eq!(resp.status(), 400, "{bad}");
        assert_eq!(resp.headers()["content-type"], "application/problem+json");
    }
    let (status, replay) = app.post_json_admin("/v1/admin/dlq/replay").await;
    assert_eq!((status, &replay["replayed"]), (200, &serde_json::json!(0)));
    app.cleanup().await;
}

/// A message of a newer format than this consumer reads (`x-stockd-format`
/// above `mq::format::FORMAT`, as a later release would send during a
/// rolling upgrade) is never applied: it is dead-lettered with a reason
/// naming its version, its format header kept, and the ledger is untouched;
/// a message of this release's format next to it is applied.
#[tokio::test]
async fn a_message_of_a_newer_format_is_dead_lettered_not_applied() {
    use lapin::types::{AMQPValue, FieldTable};
    use stockd::mq::format::{FORMAT, FORMAT_HEADER};
    let app = TestApp::spawn().await;
    app.create_sku(1, 10, 5).await;
    let deduction = |rid: &str| stockd::domain::Deduction {
        request_id: stockd::domain::RequestId::parse(rid).unwrap(),
        sku_id: TestApp::sku(1),
        user_id: stockd::domain::UserId::new(4).unwrap(),
        count: 1,
        created_ms: 1,
        expires_ms: u64::MAX / 2,
        order: None,
        client: None,
    };
    let queue = app.res.publisher.topology().deduct_queue.clone();
    for (rid, format) in [("newer", FORMAT + 1), ("this", FORMAT)] {
        let mut headers = FieldTable::default();
        headers.insert(FORMAT_HEADER.into(), AMQPValue::LongUInt(format));
        let props = lapin::BasicProperties::default().with_headers(headers);
        let payload = stockd::mq::message::encode(&[deduction(rid)]);
        app.publish_to_queue(&queue, &payload, props).await;
    }
    app.eventually(
        "the newer one dead-lettered",
        Duration::from_secs(20),
        || async { app.dlq_depth().await == 1 },
    )
    .await;
    app.wait_ledger_rows(1).await;
    let listed = dlq::list(&app.res.publisher, filter(None), &mut |_| {})
        .await
        .unwrap();
    let dead = &listed.deductions[0];
    assert_eq!(dead.request_id, "newer");
    assert!(
        dead.reason.contains(&format!("version {}", FORMAT + 1)),
        "{}",
        dead.reason
    );
    assert_eq!(
        app.ledger_rows().await,
        1,
        "only this release's message applied"
    );
    app.cleanup().await;
}
