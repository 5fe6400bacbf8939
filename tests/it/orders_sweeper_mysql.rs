//! The order sweeper asks MySQL before it undoes an intent past its
//! deadline (issue 50 D5). A failover of the order's shard inside the
//! replication lag can lose the commit of an order answered 201 — the
//! intent reached the replica, the commit did not — and leave its record
//! `HOLDING` in the intent index while MySQL holds the order. Releasing its
//! lines then would put units back in Redis that MySQL has sold. Played
//! here by setting the record of a committed, applied order back to
//! `HOLDING`, on a standalone Redis (an order driven through the intent
//! protocol step by step) or on the local cluster (`make test-cluster`).
//! And a sweeper that cannot ask MySQL releases nothing.

use std::time::Duration;

use stockd::config::MysqlSettings;
use stockd::db::Db;

use stockd::domain::RequestId;
use stockd::ops::order_sweeper::{sweep_once, Swept};
use stockd::redis::keys::order_shard;
use stockd::redis::order_holds::{Attempt, LineHold};
use stockd::redis::order_intents::CommitOutcome;

use crate::helpers::TestApp;
use crate::orders_intents::{assert_audit_clean, hold, intent, order_status, swept};
use crate::ports::free_port;

/// The attempts' deadline: short, so the test does not wait long for it.
const HOLD_TIMEOUT_MS: u64 = 300;
/// No pass of the api's own sweeper after its first: the test runs the passes.
const NO_SWEEP_MS: u64 = 3_600_000;

/// What a failover of the order's shard that lost the commit leaves: the
/// record back to `HOLDING` with the attempt's deadline, the order back in
/// its shard's intent index (the intent's writes reached the replica, the
/// commit's did not).
async fn lose_the_commit(app: &TestApp, attempt: &Attempt) {
    let keys = app.res.redis.keys();
    let record = keys.order(&attempt.order_id);
    let index = keys.order_intents(order_shard(&attempt.order_id));
    let deadline = attempt.deadline_ms.to_string();
    app.redis_cmd(&[
        "HSET",
        &record,
        "status",
        "HOLDING",
        "deadline_ms",
        &deadline,
    ])
    .await;
    app.redis_cmd(&["ZADD", &index, &deadline, attempt.order_id.as_str()])
        .await;
}

async fn record_status(app: &TestApp, order_id: &str) -> Option<String> {
    let order_id = RequestId::parse(order_id).unwrap();
    let record = app.res.redis.orders().record(&order_id).await.unwrap();
    record.map(|r| r.status.as_str().to_string())
}

/// An order committed, handed on by the relay and applied `RESERVED` in
/// MySQL, whose commit the order's shard then loses: a sweep past the
/// deadline finds MySQL holding the order and re-commits the record
/// (`RESERVED`, out of the index) instead of releasing the lines; Redis
/// keeps every unit held, the stores agree and the audit is clean.
#[tokio::test]
async fn an_order_mysql_holds_is_recommitted_by_the_sweeper_not_released() {
    let app = TestApp::with(swept(HOLD_TIMEOUT_MS, NO_SWEEP_MS)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let of = TestApp::order_lines(&[(1, 2), (2, 1)]);
    let attempt = intent(&app, "lost-commit", 7, &of).await;
    for (sku, count) in [(1, 2), (2, 1)] {
        let held = hold(&app, &attempt, sku, count).await;
        assert!(matches!(held, LineHold::Held { .. }), "{held:?}");
    }
    let committed = (app.res.redis.orders())
        .commit(&attempt, &of, &[])
        .await
        .unwrap();
    assert!(
        matches!(committed, CommitOutcome::Committed { .. }),
        "{committed:?}"
    );
    // Committed without the api's publish: the relay hands it on.
    app.eventually("MySQL holds the order", Duration::from_secs(30), || async {
        order_status(&app, "lost-commit").await.as_deref() == Some("RESERVED")
    })
    .await;
    for sku in 1..=2 {
        app.wait_drained(sku).await;
    }

    lose_the_commit(&app, &attempt).await;
    tokio::time::sleep(Duration::from_millis(HOLD_TIMEOUT_MS + 100)).await;
    let swept = sweep_once(&app.res.redis, &app.res.db).await.unwrap();
    assert_eq!((swept.recommitted, swept.undone), (1, 0), "{swept:?}");

    let held = (app.redis_available(1).await, app.redis_available(2).await);
    assert_eq!(held, (Some(3), Some(4)), "the order's lines stay held");
    assert_eq!(
        record_status(&app, "lost-commit").await.as_deref(),
        Some("RESERVED"),
        "the record re-committed from MySQL"
    );
    assert_eq!(app.res.redis.orders().open_intents().await.unwrap(), 0);
    let (status, order) = app.get_json("/v1/orders/lost-commit").await;
    assert_eq!((status, order["status"].as_str()), (200, Some("RESERVED")));
    for sku in 1..=2 {
        app.assert_conserved(sku).await;
    }
    assert_audit_clean(&app).await;
    app.cleanup().await;
}

/// A pool whose MySQL refuses every connection (nothing listens on its
/// port): the sweeper's question cannot be answered.
fn unreachable_mysql(app: &TestApp) -> Db {
    let settings = MysqlSettings {
        url: format!("mysql://stockd:none@127.0.0.1:{}/none", free_port()),
        ..app.res.settings.mysql.clone()
    };
    Db::new(&settings).unwrap()
}

/// An api that died between its holds, swept while MySQL cannot answer:
/// the sweeper cannot tell a dead attempt from a commit Redis lost, so it
/// releases nothing; the intent is skipped, counted
/// (`stockd_order_sweep_failures_total{stage="mysql"}`) and left in the
/// index. The next pass, with MySQL answering (no such order), undoes it.
#[tokio::test]
async fn the_sweeper_releases_nothing_while_mysql_cannot_answer() {
    let app = TestApp::with(swept(HOLD_TIMEOUT_MS, NO_SWEEP_MS)).await;
    app.create_sku(1, 5, 5).await;
    let of = TestApp::order_lines(&[(1, 2)]);
    let attempt = intent(&app, "dead-api", 3, &of).await;
    let held = hold(&app, &attempt, 1, 2).await;
    assert!(matches!(held, LineHold::Held { .. }), "{held:?}");
    tokio::time::sleep(Duration::from_millis(HOLD_TIMEOUT_MS + 100)).await;

    let failures = r#"stockd_order_sweep_failures_total{stage="mysql"}"#;
    let before = app.metric_sum(failures).await;
    let swept = sweep_once(&app.res.redis, &unreachable_mysql(&app))
        .await
        .unwrap();
    assert_eq!(
        swept,
        Swept {
            undone: 0,
            recommitted: 0,
            skipped: 1
        }
    );
    assert_eq!(app.redis_available(1).await, Some(3), "nothing released");
    assert_eq!(app.res.redis.orders().open_intents().await.unwrap(), 1);
    assert!(
        app.metric_sum(failures).await > before,
        "the skip is counted"
    );

    let swept = sweep_once(&app.res.redis, &app.res.db).await.unwrap();
    assert_eq!(swept.undone, 1, "{swept:?}");
    assert_eq!(app.redis_available(1).await, Some(5));
    assert_eq!(app.res.redis.orders().open_intents().await.unwrap(), 0);
    assert_audit_clean(&app).await;
    app.cleanup().await;
}
