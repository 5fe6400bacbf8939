//! The intent protocol of orders held line by line (`ops/order_saga.rs`):
//! on a Redis Cluster (`make test-cluster`) for every order, on a
//! standalone Redis for an order with a line on a split SKU. An api that
//! died between line holds is undone by the sweeper within its bound, and
//! the dead attempt's late hold and commit are refused; the commit and the
//! sweeper's abort have one winner; a split SKU is one line of an order,
//! held and refused whole. Each ends with `stockd audit` clean.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use serde_json::json;
use stockd::domain::{OrderLines, RequestId, Requester, UserId};
use stockd::ops::invariants;
use stockd::ops::order_saga::{line_by_line, release_all};
use stockd::ops::order_sweeper::{sweep_once, Swept};
use stockd::redis::order_holds::{Attempt, LineHold};
use stockd::redis::order_intents::{AbortStep, CommitOutcome, IntentOutcome};
use stockd::redis::{LineRefusal, OrderOutcome};

use crate::helpers::http::order_body;
use crate::helpers::{TestApp, TestOptions};

fn options(hold_timeout_ms: u64) -> TestOptions {
    swept(hold_timeout_ms, 1_000)
}

/// With the api's sweeper looking every `sweep_interval_ms` (its first
/// pass runs as the api starts).
pub(crate) fn swept(hold_timeout_ms: u64, sweep_interval_ms: u64) -> TestOptions {
    TestOptions {
        tweak: Some(Arc::new(move |s| {
            s.closer.grace_ms = 0;
            s.orders.hold_timeout_ms = hold_timeout_ms;
            s.orders.sweep_interval_ms = sweep_interval_ms;
        })),
        ..TestOptions::default()
    }
}

/// The SKU view's `available` (a split SKU's: pool and buckets together).
async fn available(app: &TestApp, sku: u64) -> i64 {
    let (status, view) = app.get_json(&format!("/v1/skus/{sku}")).await;
    assert_eq!(status, 200, "{view}");
    view["available"].as_i64().unwrap()
}

pub(crate) async fn order_status(app: &TestApp, order_id: &str) -> Option<String> {
    let mut db = app.mysql().await;
    db.exec_first("SELECT status FROM orders WHERE order_id = ?", (order_id,))
        .await
        .unwrap()
}

pub(crate) async fn assert_audit_clean(app: &TestApp) {
    let report = invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap();
    assert!(report.ok, "{}", report.table());
}

pub(crate) async fn intent(app: &TestApp, order_id: &str, user: u64, of: &OrderLines) -> Attempt {
    let order_id = RequestId::parse(order_id).unwrap();
    let user = UserId::new(user).unwrap();
    let timeout = app.res.settings.orders.hold_timeout_ms;
    match app
        .res
        .redis
        .orders()
        .intent(&order_id, user, of, timeout, &Requester::Anyone)
        .await
        .unwrap()
    {
        IntentOutcome::Hold(attempt) => attempt,
        other => panic!("intent: {other:?}"),
    }
}

pub(crate) async fn hold(app: &TestApp, attempt: &Attempt, sku: u64, count: u32) -> LineHold {
    app.res
        .redis
        .reservations()
        .hold_line(attempt, TestApp::sku(sku), count)
        .await
        .unwrap()
}

/// An api that holds two of three lines and dies (no commit, no undo): a
/// retry meanwhile is 503 holding nothing more; the sweeper every api node
/// runs gives both lines back within `hold_timeout_ms` plus a sweep period
/// (asserted against the 10 s aim); the dead attempt's late hold
/// of its third line and its commit are refused; the buyer's retry is a new
/// attempt, held whole and applied by the consumer.
#[tokio::test]
async fn an_api_that_died_between_line_holds_is_undone_by_the_sweeper() {
    let app = TestApp::with(options(500)).await;
    for sku in 1..=3 {
        app.create_sku(sku, 5, 5).await;
    }
    let of = [(1, 2), (2, 1), (3, 1)];
    let attempt = intent(&app, "dies", 7, &TestApp::order_lines(&of)).await;
    for (sku, count) in [(1, 2), (2, 1)] {
        let held = hold(&app, &attempt, sku, count).await;
        assert!(matches!(held, LineHold::Held { .. }), "{held:?}");
    }
    let died = Instant::now();
    assert_eq!((available(&app, 1).await, available(&app, 2).await), (3, 4));

    let (status, problem) = app.place_order(&order_body("dies", 7, &of)).await;
    assert_eq!(status, 503, "a retry while the attempt holds: {problem}");
    assert_eq!(available(&app, 3).await, 5, "the retry held nothing");

    app.eventually(
        "the dead attempt's units back",
        Duration::from_secs(10),
        || async { available(&app, 1).await == 5 && available(&app, 2).await == 5 },
    )
    .await;
    let took = died.elapsed();
    eprintln!("orders_intents: a dead attempt undone after {took:?} (hold timeout 500 ms, sweep every 1 s)");
    assert!(took < Duration::from_secs(10), "{took:?}");

    assert_eq!(hold(&app, &attempt, 3, 1).await, LineHold::Aborted);
    let lost = app
        .res
        .redis
        .orders()
        .commit(&attempt, &TestApp::order_lines(&of), &[])
        .await
        .unwrap();
    assert_eq!(lost, CommitOutcome::Lost);
    assert_eq!(available(&app, 3).await, 5, "the late hold held nothing");
    assert_eq!(app.res.redis.orders().open_intents().await.unwrap(), 0);

    let (status, answer) = app.place_order(&order_body("dies", 7, &of)).await;
    assert_eq!(status, 201, "{answer}");
    app.wait_ledger_rows(3).await;
    assert_eq!(
        order_status(&app, "dies").await.as_deref(),
        Some("RESERVED")
    );
    for sku in 1..=3 {
        app.wait_drained(sku).await;
        app.assert_conserved(sku).await;
    }
    assert_audit_clean(&app).await;
    app.cleanup().await;
}

/// Every line held, then the deadline passes before the commit: the commit
/// loses (LATE, or LOST when a sweeper took it first) and the units come
/// back; every line held and committed in time: the sweeper finds nothing.
#[tokio::test]
async fn the_commit_and_the_sweepers_abort_have_one_winner() {
    let app = TestApp::with(options(200)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let of = TestApp::order_lines(&[(1, 1), (2, 1)]);

    let late = intent(&app, "late", 1, &of).await;
    for sku in [1, 2] {
        assert!(matches!(
            hold(&app, &late, sku, 1).await,
            LineHold::Held { .. }
        ));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let outcome = app
        .res
        .redis
        .orders()
        .commit(&late, &of, &[])
        .await
        .unwrap();
    assert!(
        matches!(outcome, CommitOutcome::Late | CommitOutcome::Lost),
        "{outcome:?}"
    );
    sweep_once(&app.res.redis, &app.res.db).await.unwrap();
    app.eventually(
        "the late attempt undone",
        Duration::from_secs(10),
        || async { available(&app, 1).await == 5 && available(&app, 2).await == 5 },
    )
    .await;

    let in_time = intent(&app, "in-time", 2, &of).await;
    for sku in [1, 2] {
        assert!(matches!(
            hold(&app, &in_time, sku, 1).await,
            LineHold::Held { .. }
        ));
    }
    let outcome = app
        .res
        .redis
        .orders()
        .commit(&in_time, &of, &[])
        .await
        .unwrap();
    assert!(
        matches!(outcome, CommitOutcome::Committed { .. }),
        "{outcome:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        sweep_once(&app.res.redis, &app.res.db)
            .await
            .unwrap()
            .undone,
        0
    );
    assert_eq!((available(&app, 1).await, available(&app, 2).await), (4, 4));
    let record = app
        .res
        .redis
        .orders()
        .record(&RequestId::parse("in-time").unwrap())
        .await
        .unwrap()
        .expect("the committed order's record");
    assert_eq!(record.status.as_str(), "RESERVED");
    // Committed in Redis without the api's publish: the relay hands it on.
    app.eventually("the relay's hand-off", Duration::from_secs(30), || async {
        order_status(&app, "in-time").await.is_some()
    })
    .await;
    assert_audit_clean(&app).await;
    app.cleanup().await;
}

/// A SKU split into three buckets as one line: an order is held whole
/// (its line from the buyer's bucket, leasing from the pool) and applied;
/// an order refused on its other line holds nothing of the split one; the
/// cancel gives every unit back.
#[tokio::test]
async fn a_split_sku_is_one_line_of_an_order() {
    let app = TestApp::with(options(5000)).await;
    let (status, answer) = app
        .put_sku_json(
            1,
            &json!({"total_stock": 30, "limit_per_user": 5, "buckets": 3}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    app.create_sku(2, 10, 50).await;

    let (status, answer) = app
        .place_order(&order_body("split-a", 1, &[(1, 2), (2, 1)]))
        .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        (available(&app, 1).await, available(&app, 2).await),
        (28, 9)
    );

    let (status, problem) = app
        .place_order(&order_body("split-b", 2, &[(1, 1), (2, 20)]))
        .await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(problem["line"]["sku_id"], 2, "{problem}");
    assert_eq!(problem["line"]["code"], "INSUFFICIENT_STOCK", "{problem}");
    assert_eq!(
        (available(&app, 1).await, available(&app, 2).await),
        (28, 9),
        "the refused order held nothing"
    );

    app.wait_ledger_rows(2).await;
    assert_eq!(
        order_status(&app, "split-a").await.as_deref(),
        Some("RESERVED")
    );
    assert_eq!(app.post_json("/v1/orders/split-a/cancel").await.0, 200);
    app.eventually("every unit back", Duration::from_secs(10), || async {
        available(&app, 1).await == 30 && available(&app, 2).await == 10
    })
    .await;
    assert_audit_clean(&app).await;
    app.cleanup().await;
}

/// No sweeper runs (its next pass is an hour away): an attempt whose api
/// died stays half held, and `stockd audit`'s `orders_whole` names it once
/// it is past its deadline by more than the grace; one sweep undoes it and
/// the audit is clean again.
#[tokio::test]
async fn the_audit_names_an_intent_no_sweeper_undid() {
    let app = TestApp::with(swept(100, 3_600_000)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let of = TestApp::order_lines(&[(1, 1), (2, 1)]);
    let attempt = intent(&app, "stranded", 3, &of).await;
    assert!(matches!(
        hold(&app, &attempt, 1, 1).await,
        LineHold::Held { .. }
    ));
    // Past its deadline by more than the audit's grace: move the deadline
    // back rather than wait.
    let shard = stockd::redis::keys::order_shard(&attempt.order_id);
    let index = app.res.redis.keys().order_intents(shard);
    app.redis_cmd(&["ZADD", &index, "1", "stranded"]).await;
    let report = invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap();
    let whole = report.check(invariants::ORDERS_WHOLE).unwrap();
    assert!(!whole.ok, "{}", report.table());
    assert!(
        whole.details.iter().any(|d| d.contains("order stranded")),
        "{whole:?}"
    );
    // The record's own deadline (100 ms) decides the sweeper's abort.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        sweep_once(&app.res.redis, &app.res.db)
            .await
            .unwrap()
            .undone,
        1
    );
    assert_eq!(available(&app, 1).await, 5);
    assert_audit_clean(&app).await;
    app.cleanup().await;
}

/// How much longer than `orders.hold_timeout_ms` a key a refusal leaves may
/// live: the tombstone's margin past the attempt's deadline
/// (`TOMBSTONE_MARGIN_MS`, 1 s), with room for the clocks of the order's
/// and the line's nodes and this test's own delay before it reads a TTL.
const REFUSAL_KEY_MARGIN_MS: i64 = 3_000;

/// The keys of this test that `after` has and `before` had not.
fn new_keys(before: &[String], after: &[String]) -> Vec<String> {
    let mut keys: Vec<String> = after
        .iter()
        .filter(|k| !before.contains(k))
        .cloned()
        .collect();
    keys.sort();
    keys
}

async fn pttl(app: &TestApp, key: &str) -> i64 {
    let mut conn = app.redis_conn().await;
    deadpool_redis::redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// SKU 1 split into two buckets (so an order goes the intent way also on a
/// standalone Redis), SKUs 2..=20 of 5 units (limit 10: a line of 6 is
/// short of stock, not over the limit).
async fn twenty_skus(app: &TestApp) {
    let (status, answer) = app
        .put_sku_json(
            1,
            &json!({"total_stock": 40, "limit_per_user": 5, "buckets": 2}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    for sku in 2..=20 {
        app.create_sku(sku, 5, 10).await;
    }
}

/// A 20-line order refused on its third line (short of stock): it wrote
/// nothing for the 17 lines never held, and what it left (the tombstones of
/// the three lines whose hold was sent, the `ABORTED` record) lives no
/// longer than the attempt's deadline plus a margin, then is gone; a
/// refusal costs the intent, one hold and one release per line sent, and
/// the abort's two steps — not a release of every line.
#[tokio::test]
async fn a_refused_order_leaves_no_lasting_key_and_releases_only_the_lines_it_sent() {
    let hold_timeout_ms = 500;
    let app = TestApp::with(options(hold_timeout_ms)).await;
    twenty_skus(&app).await;
    let mut of: Vec<(u64, u32)> = (1..=20).map(|sku| (sku, 1)).collect();
    of[2].1 = 6;
    let before = app.redis_keys().await;

    let (status, problem) = app.place_order(&order_body("refused-20", 4, &of)).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(
        problem["line"],
        json!({"sku_id": 3, "code": "INSUFFICIENT_STOCK"}),
        "{problem}"
    );
    let left = new_keys(&before, &app.redis_keys().await);
    eprintln!("orders_intents: a refused 20-line order left {left:?}");
    let tombstones = left.iter().filter(|k| k.contains(":otomb:")).count();
    let records = left.iter().filter(|k| k.contains(":order:")).count();
    assert!(tombstones <= 3, "tombstones only of lines sent: {left:?}");
    assert_eq!(tombstones + records, left.len(), "{left:?}");
    for key in &left {
        let ttl = pttl(&app, key).await;
        assert!(
            ttl > 0 && ttl <= hold_timeout_ms as i64 + REFUSAL_KEY_MARGIN_MS,
            "{key} lives {ttl} ms"
        );
    }
    app.eventually(
        "the refusal's keys gone",
        Duration::from_secs(10),
        || async { new_keys(&before, &app.redis_keys().await).is_empty() },
    )
    .await;
    for sku in 1..=20 {
        let stock = if sku == 1 { 40 } else { 5 };
        assert_eq!(available(&app, sku).await, stock, "SKU {sku}");
    }

    // The calls of one refusal, once the layouts are known (the first
    // refusal read them).
    let lines = TestApp::order_lines(&of);
    let user = UserId::new(4).unwrap();
    let order_id = RequestId::parse("refused-20b").unwrap();
    let (outcome, calls) = stockd::redis::core::counting(stockd::ops::order_saga::place(
        &app.res.redis,
        &order_id,
        user,
        &lines,
        hold_timeout_ms,
        &Requester::Anyone,
        false,
    ))
    .await;
    let outcome = outcome.unwrap();
    assert!(
        matches!(outcome, stockd::redis::OrderOutcome::Refused { sku_id, .. } if sku_id.get() == 3),
        "{outcome:?}"
    );
    eprintln!("orders_intents: a 20-line order refused on its third line took {calls} Redis calls");
    // A standalone Redis first asks order.lua (which refuses the split
    // line). Then the intent, three holds, the abort, three releases, the
    // abort's end: 9 (a release of every line made it 26); the split line's
    // release then rebalances its buckets (a few calls, as any release of a
    // split SKU does).
    assert!(calls <= 14, "{calls} Redis calls");
    assert_audit_clean(&app).await;
    app.cleanup().await;
}

/// A line naming a SKU that does not exist (the first of 19) is refused
/// before the intent is written, as a standalone Redis refuses it: 404
/// `SKU_NOT_FOUND` naming the line; a SKU known to MySQL but not loaded
/// into Redis is 503. Neither writes a key: no intent, no tombstone.
#[tokio::test]
async fn an_order_naming_an_unknown_sku_is_refused_before_its_intent() {
    let app = TestApp::with(options(500)).await;
    let (status, answer) = app
        .put_sku_json(
            1,
            &json!({"total_stock": 40, "limit_per_user": 5, "buckets": 2}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    app.create_sku(2, 5, 5).await;
    let before = app.redis_keys().await;

    let of: Vec<(u64, u32)> = std::iter::once((1, 1))
        .chain((901..=919).map(|sku| (sku, 1)))
        .collect();
    let (status, problem) = app.place_order(&order_body("ghosts", 5, &of)).await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (404, Some("SKU_NOT_FOUND")),
        "{problem}"
    );
    assert_eq!(
        problem["line"],
        json!({"sku_id": 901, "code": "SKU_NOT_FOUND"}),
        "{problem}"
    );
    assert_eq!(
        new_keys(&before, &app.redis_keys().await),
        Vec::<String>::new()
    );

    let (outcome, calls) = stockd::redis::core::counting(stockd::ops::order_saga::place(
        &app.res.redis,
        &RequestId::parse("ghosts-b").unwrap(),
        UserId::new(5).unwrap(),
        &TestApp::order_lines(&of),
        500,
        &Requester::Anyone,
        false,
    ))
    .await;
    assert!(
        matches!(outcome.unwrap(), stockd::redis::OrderOutcome::Refused { sku_id, .. } if sku_id.get() == 901)
    );
    // order.lua on a standalone Redis, then one read of each unknown SKU.
    eprintln!("orders_intents: a 20-line order of unknown SKUs took {calls} Redis calls");
    assert!(calls <= 20, "{calls} Redis calls");

    // SKU 2 in MySQL, its Redis hash gone behind stockd's back: 503, as a
    // single reservation. The first order may still find SKU 2's layout
    // cached and write its intent (what it leaves lives seconds); its hold
    // finds the SKU gone and drops the layout, so the next order is refused
    // before its intent.
    let sku_key = app.res.redis.keys().sku(TestApp::sku(2));
    app.redis_del(&[sku_key]).await;
    let before = app.redis_keys().await;
    for order_id in ["unloaded", "unloaded-b"] {
        let (status, problem) = app
            .place_order(&order_body(order_id, 5, &[(1, 1), (2, 1)]))
            .await;
        assert_eq!(status, 503, "{problem}");
        assert!(
            problem["detail"]
                .as_str()
                .is_some_and(|d| d.contains("SKU 2 is not loaded into Redis")),
            "{problem}"
        );
    }
    for key in new_keys(&before, &app.redis_keys().await) {
        assert!(key.ends_with(":unloaded"), "{key}");
        let ttl = pttl(&app, &key).await;
        assert!(
            ttl > 0 && ttl <= 500 + REFUSAL_KEY_MARGIN_MS,
            "{key} lives {ttl} ms"
        );
    }
    assert_eq!(available(&app, 1).await, 40);
    app.cleanup().await;
}

/// A hold that reaches its line after the attempt's deadline is refused by
/// the hold itself, tombstone or not: what bounds how long a tombstone
/// must live.
#[tokio::test]
async fn a_hold_past_its_attempts_deadline_is_refused_without_a_tombstone() {
    let app = TestApp::with(options(300)).await;
    app.create_sku(1, 5, 5).await;
    let of = TestApp::order_lines(&[(1, 1)]);
    let attempt = intent(&app, "tardy", 6, &of).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(hold(&app, &attempt, 1, 1).await, LineHold::Aborted);
    assert_eq!(available(&app, 1).await, 5);
    app.eventually("the intent swept", Duration::from_secs(10), || async {
        app.res.redis.orders().open_intents().await.unwrap() == 0
    })
    .await;
    app.cleanup().await;
}

/// An attempt undone by its api before its deadline (a line refused): the
/// tombstone of the line it had held refuses that hold run again late, and
/// lives about the hold timeout, not the record lifetime.
#[tokio::test]
async fn an_undone_lines_tombstone_refuses_a_late_hold_and_lives_about_the_hold_timeout() {
    let hold_timeout_ms = 2_000;
    let app = TestApp::with(options(hold_timeout_ms)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let of = TestApp::order_lines(&[(1, 1), (2, 1)]);
    let attempt = intent(&app, "undone", 8, &of).await;
    assert!(matches!(
        hold(&app, &attempt, 1, 1).await,
        LineHold::Held { .. }
    ));
    let taken = app
        .res
        .redis
        .orders()
        .abort(
            &attempt.order_id,
            Some(attempt.number),
            stockd::redis::order_intents::AbortStep::Own,
        )
        .await
        .unwrap();
    assert!(
        matches!(
            taken,
            stockd::redis::order_intents::AbortOutcome::Undo { .. }
        ),
        "{taken:?}"
    );
    stockd::ops::order_saga::release_all(&app.res.redis, &attempt, &of)
        .await
        .unwrap();
    assert_eq!(available(&app, 1).await, 5);
    assert_eq!(hold(&app, &attempt, 1, 1).await, LineHold::Aborted);
    assert_eq!(available(&app, 1).await, 5, "the late hold held nothing");
    let keys = app.redis_keys().await;
    let tombstones: Vec<&String> = keys.iter().filter(|k| k.contains(":otomb:")).collect();
    assert!(!tombstones.is_empty(), "{keys:?}");
    for key in tombstones {
        let ttl = pttl(&app, key).await;
        assert!(
            ttl > 0 && ttl <= hold_timeout_ms as i64 + REFUSAL_KEY_MARGIN_MS,
            "{key} lives {ttl} ms"
        );
    }
    assert_audit_clean(&app).await;
    app.cleanup().await;
}

/// One intent the sweeper cannot take (its record a key of the wrong type:
/// every abort of it fails) does not stop the pass: the good intent after
/// it, past its deadline, is undone in the same pass (issue 50 D3: a `?`
/// ended the pass on every api node, and every later intent's units stayed
/// held past the bound).
#[tokio::test]
async fn a_failing_intent_does_not_stop_the_sweep_pass() {
    let app = TestApp::with(swept(100, 3_600_000)).await;
    app.create_sku(1, 5, 5).await;
    let of = TestApp::order_lines(&[(1, 2)]);
    let attempt = intent(&app, "good", 3, &of).await;
    assert!(matches!(
        hold(&app, &attempt, 1, 2).await,
        LineHold::Held { .. }
    ));
    // A malformed intent in the same shard, first in its index.
    let shard = stockd::redis::keys::order_shard(&attempt.order_id);
    let bad = (0..)
        .map(|i| RequestId::parse(&format!("bad-{i}")).unwrap())
        .find(|id| stockd::redis::keys::order_shard(id) == shard)
        .unwrap();
    let keys = app.res.redis.keys();
    app.redis_cmd(&["SET", &keys.order(&bad), "not a hash"])
        .await;
    let index = keys.order_intents(shard);
    app.redis_cmd(&["ZADD", &index, "1", bad.as_str()]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(available(&app, 1).await, 3);
    let swept = sweep_once(&app.res.redis, &app.res.db).await;
    assert!(
        matches!(
            swept,
            Ok(Swept {
                undone: 1,
                skipped: 1,
                ..
            })
        ),
        "{swept:?}"
    );
    assert_eq!(available(&app, 1).await, 5, "the good intent was undone");
    app.cleanup().await;
}

/// A release routed by a bucket layout cached before a re-split that shrank
/// the SKU (another api node's sweeper, say): the buyer's old bucket hash is
/// gone, and the line held since in its new bucket must still be found and
/// released (issue 50 D7: it answered `NONE` and the line stayed held).
#[tokio::test]
async fn a_release_routed_by_a_layout_that_shrank_finds_the_held_line() {
    let app = TestApp::with(swept(60_000, 3_600_000)).await;
    let sku = TestApp::sku(1);
    let put = |n: u16| json!({"total_stock": 40, "limit_per_user": 5, "buckets": n});
    let (status, body) = app.put_sku_json(1, &put(4)).await;
    assert_eq!(status, 200, "{body}");
    // Another node's store, which cached the four-bucket layout.
    let stale = stockd::redis::RedisStore::new(&app.res.settings.redis, 60).unwrap();
    let old = stale.buckets().layout(sku).await.unwrap();
    assert_eq!(old.n(), 4);
    let user = (1..)
        .find(|&u| old.bucket_of(UserId::new(u).unwrap()) == 3)
        .unwrap();
    let (status, body) = app.put_sku_json(1, &put(2)).await;
    assert_eq!(status, 200, "{body}");
    let attempt = intent(&app, "shrunk", user, &TestApp::order_lines(&[(1, 2)])).await;
    assert!(matches!(
        hold(&app, &attempt, 1, 2).await,
        LineHold::Held { .. }
    ));
    assert_eq!(available(&app, 1).await, 38);
    let released = stale.reservations().release_line(&attempt, sku).await;
    assert!(
        matches!(released, Ok(true)),
        "the stale node's release finds the line: {released:?}"
    );
    assert_eq!(available(&app, 1).await, 40);
    app.cleanup().await;
}

/// SKU `sku`'s sold-out marker in Redis (an unsplit SKU's hash).
async fn marked_sold_out(app: &TestApp, sku: u64) -> bool {
    let key = app.res.redis.keys().sku(TestApp::sku(sku));
    let mut conn = app.redis_conn().await;
    let flag: Option<String> = deadpool_redis::redis::cmd("HGET")
        .arg(key)
        .arg("soldout")
        .query_async(&mut conn)
        .await
        .unwrap();
    flag.is_some()
}

/// Issue 50 D4: A = 1, B = 1. O1 {A×1, B×2} holds A and is bound to fail
/// on B; while it holds, O2 {A×1, B×1}, which fits once O1 gives A back,
/// is answered "retry" (503), not refused `SOLD_OUT`, and A is not marked
/// sold out by a hold that was no sale. O1 then fails on B and is undone;
/// O2's retry holds both lines, and once committed both SKUs are marked
/// sold out (the settle), and a third order is refused `SOLD_OUT`.
#[tokio::test]
async fn an_attempt_bound_to_fail_neither_refuses_an_order_that_fits_nor_marks_sold_out() {
    let app = TestApp::with(options(5_000)).await;
    app.create_sku(1, 1, 5).await;
    app.create_sku(2, 1, 5).await;
    let redis = &app.res.redis;
    let timeout = app.res.settings.orders.hold_timeout_ms;

    let o1_lines = TestApp::order_lines(&[(1, 1), (2, 2)]);
    let o1 = intent(&app, "d4-o1", 7, &o1_lines).await;
    let held = hold(&app, &o1, 1, 1).await;
    assert!(
        matches!(held, LineHold::Held { available_after: 0 }),
        "{held:?}"
    );
    assert!(!marked_sold_out(&app, 1).await, "a hold is no sale yet");

    let o2_id = RequestId::parse("d4-o2").unwrap();
    let o2_lines = TestApp::order_lines(&[(1, 1), (2, 1)]);
    let buyer = UserId::new(8).unwrap();
    let o2 = line_by_line(
        redis,
        &o2_id,
        buyer,
        &o2_lines,
        timeout,
        &Requester::Anyone,
        false,
    )
    .await
    .unwrap();
    assert!(
        matches!(o2, OrderOutcome::Retry(_)),
        "an order that fits once O1 fails must not be refused while O1 holds: {o2:?}"
    );
    assert_eq!(
        (available(&app, 1).await, available(&app, 2).await),
        (0, 1),
        "the answered retry holds nothing"
    );

    let short = hold(&app, &o1, 2, 2).await;
    assert_eq!(
        short,
        LineHold::Refused(LineRefusal::Insufficient { available: 1 })
    );
    redis
        .orders()
        .abort(&o1.order_id, Some(o1.number), AbortStep::Own)
        .await
        .unwrap();
    release_all(redis, &o1, &o1_lines).await.unwrap();
    assert_eq!(available(&app, 1).await, 1, "O1 undone");

    let o2 = line_by_line(
        redis,
        &o2_id,
        buyer,
        &o2_lines,
        timeout,
        &Requester::Anyone,
        false,
    )
    .await
    .unwrap();
    assert!(matches!(o2, OrderOutcome::Reserved { .. }), "{o2:?}");
    app.eventually(
        "both emptied SKUs marked sold out once O2 is committed",
        Duration::from_secs(5),
        || async { marked_sold_out(&app, 1).await && marked_sold_out(&app, 2).await },
    )
    .await;
    let o3_id = RequestId::parse("d4-o3").unwrap();
    let o3_lines = TestApp::order_lines(&[(1, 1)]);
    let o3 = line_by_line(
        redis,
        &o3_id,
        UserId::new(9).unwrap(),
        &o3_lines,
        timeout,
        &Requester::Anyone,
        false,
    )
    .await
    .unwrap();
    assert!(
        matches!(
            o3,
            OrderOutcome::Refused {
                why: LineRefusal::SoldOut,
                ..
            }
        ),
        "with no attempt left holding, a short line is refused: {o3:?}"
    );

    app.wait_ledger_rows(2).await;
    for sku in 1..=2 {
        app.wait_drained(sku).await;
        app.assert_conserved(sku).await;
    }
    assert_audit_clean(&app).await;
    app.cleanup().await;
}
