//! Work MySQL acknowledged and then lost (a failover to an asynchronous replica
//! that had not applied it), played by undoing the commits in the test's
//! database: the reconciler's `MYSQL_BEHIND` and its repair, and the lifecycle's
//! guard that never releases a reservation Redis shows as paid.
//! (The real failover, with a primary, a replica and a proxy: chaos s17.)

use std::sync::Arc;

use mysql_async::prelude::Queryable;

use stockd::ops::invariants;
use stockd::ops::lifecycle::{self, Transition, TransitionOutcome};
use stockd::ops::reconcile::Verdict;
use stockd::roles::closer::Closer;

use crate::helpers::{TestApp, TestOptions};

/// Judge lost work as soon as two looks agree (the age bound has its unit test).
fn judged_at_once() -> TestOptions {
    TestOptions {
        tweak: Some(Arc::new(|s| s.reconcile.lost_after_ms = 0)),
        ..TestOptions::default()
    }
}

/// Undoes `request_id`'s commit of its deduction: the row and its units go.
pub(crate) async fn lose_deduction(app: &TestApp, sku: u64, request_id: &str, count: i64) {
    let mut db = app.mysql().await;
    db.exec_drop(
        "DELETE FROM stock_deduct_idempotent WHERE sku_id = ? AND deduct_request_id = ?",
        (sku, request_id),
    )
    .await
    .unwrap();
    db.exec_drop(
        "UPDATE sku_stock SET available_stock = available_stock + ? WHERE sku_id = ?",
        (count, sku),
    )
    .await
    .unwrap();
}

/// Undoes a confirm or a release: the row is RESERVED again (a release's units
/// are taken again).
pub(crate) async fn lose_decision(app: &TestApp, sku: u64, request_id: &str, released_units: i64) {
    let mut db = app.mysql().await;
    db.exec_drop(
        "UPDATE stock_deduct_idempotent SET status = 'RESERVED', reason = NULL,
         finished_at_ms = NULL WHERE sku_id = ? AND deduct_request_id = ?",
        (sku, request_id),
    )
    .await
    .unwrap();
    db.exec_drop(
        "UPDATE sku_stock SET available_stock = available_stock - ? WHERE sku_id = ?",
        (released_units, sku),
    )
    .await
    .unwrap();
}

/// Two reservations and a confirm and a cancel lost by MySQL: the first look
/// only suspects them, the second reports MYSQL_BEHIND with their count and
/// units (so does `stockd reconcile --once`, exit 1), the repair re-publishes
/// the deductions and re-applies the confirm and the cancel, and afterwards
/// the stores agree, every acknowledged reservation is in the ledger once with
/// its final state, and the audit is clean.
#[tokio::test]
async fn work_mysql_lost_is_found_on_the_second_look_and_reapplied() {
    let app = TestApp::with(judged_at_once()).await;
    app.create_sku(1, 20, 5).await;
    for (rid, user, count) in [
        ("a", 1, 2),
        ("b", 2, 1),
        ("c", 3, 1),
        ("d", 4, 3),
        ("e", 5, 2),
    ] {
        app.reserve_ok(1, rid, user, count).await;
    }
    app.wait_ledger_rows(5).await;
    assert_eq!(app.confirm(1, "c").await.0, 200);
    assert_eq!(app.cancel(1, "d").await.0, 200);
    assert_eq!(app.cancel(1, "e").await.0, 200);
    app.wait_drained(1).await;
    assert_eq!(app.reconcile(false).await.skus[0].verdict, Verdict::Ok);

    lose_deduction(&app, 1, "a", 2).await;
    lose_deduction(&app, 1, "b", 1).await;
    lose_decision(&app, 1, "c", 0).await;
    lose_decision(&app, 1, "d", 3).await;
    // "e" lost with its release: no row, and no unit either way.
    lose_deduction(&app, 1, "e", 0).await;

    found_mysql_behind_on_the_second_look(&app).await;

    let repaired = app.reconcile(true).await;
    let line = &repaired.skus[0];
    assert_eq!(
        (line.repaired, line.republished, line.reapplied),
        (true, 2, 3),
        "{line:?}"
    );
    app.wait_ledger_rows(5).await;
    app.wait_drained(1).await;
    let status = |rid: &'static str| app.ledger_status(1, rid);
    assert_eq!(status("a").await.as_deref(), Some("RESERVED"));
    assert_eq!(status("b").await.as_deref(), Some("RESERVED"));
    assert_eq!(status("c").await.as_deref(), Some("CONFIRMED"));
    assert_eq!(status("d").await.as_deref(), Some("RELEASED"));
    assert_eq!(status("e").await.as_deref(), Some("RELEASED"));
    // Repeats answer what was decided before the loss.
    assert_eq!(app.cancel(1, "e").await.0, 200);
    let (code, body) = app.confirm(1, "e").await;
    assert_eq!(
        (code, body["code"].as_str()),
        (409, Some("RESERVATION_RELEASED"))
    );
    assert_eq!(app.mysql_available(1).await, Some(16));
    assert_eq!(app.redis_available(1).await, Some(16));
    for _ in 0..2 {
        let after = app.reconcile(false).await;
        assert_eq!(after.skus[0].verdict, Verdict::Ok, "{:?}", after.skus[0]);
    }
    let report = invariants::run(&app.res, &[], &mut |_, _| {})
        .await
        .unwrap();
    assert!(report.ok, "{report:?}");
    app.finish_conserved(1).await;
}

/// The work lost above (5 reservations, 3 units): the first look only
/// suspects it, the second and `stockd reconcile --once` (exit 1) report
/// MYSQL_BEHIND with its count and units.
async fn found_mysql_behind_on_the_second_look(app: &TestApp) {
    let first = app.reconcile(false).await;
    let line = &first.skus[0];
    assert_eq!(
        line.lost_reservations, 0,
        "one look only suspects: {line:?}"
    );
    assert!(first.second_look_wanted(false));
    let second = app.reconcile(false).await;
    let line = &second.skus[0];
    assert_eq!(
        (line.verdict, line.lost_reservations, line.lost_units),
        (Verdict::MysqlBehind, 5, 3),
        "{line:?}"
    );
    assert!(!second.healthy());
    let run = app
        .stockd(
            &["reconcile", "--once", "--json"],
            // The least lost bound the configuration allows: above the
            // least order hold timeout plus sweep interval.
            &[
                ("STOCKD__RECONCILE__LOST_AFTER_MS", "201"),
                ("STOCKD__ORDERS__HOLD_TIMEOUT_MS", "100"),
                ("STOCKD__ORDERS__SWEEP_INTERVAL_MS", "100"),
            ],
        )
        .await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.json()["skus"][0]["verdict"], "MYSQL_BEHIND", "{run:?}");
    assert_eq!(run.json()["skus"][0]["lost_units"], 3, "{run:?}");
}

/// A confirm MySQL lost is not undone by the clock: past its expiry, neither
/// the delay queue's expiry nor the sweep releases a reservation whose Redis
/// mirror says CONFIRMED — both confirm it again — and a late cancel answers
/// that it was confirmed; a cancel MySQL lost makes a late payment 409.
#[tokio::test]
async fn a_confirm_mysql_lost_is_reapplied_instead_of_an_expiry_or_a_cancel() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    for (rid, user) in [
        ("by-queue", 1),
        ("by-sweep", 2),
        ("cancelled", 3),
        ("paid-late", 4),
    ] {
        app.reserve_ok(1, rid, user, 1).await;
    }
    app.wait_ledger_rows(4).await;
    // A cancel MySQL lost: a payment arriving now is told it was released.
    assert_eq!(app.cancel(1, "paid-late").await.0, 200);
    lose_decision(&app, 1, "paid-late", 1).await;
    let (status, body) = app.confirm(1, "paid-late").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("RESERVATION_RELEASED")),
        "{body}"
    );
    assert_eq!(
        app.ledger_status(1, "paid-late").await.as_deref(),
        Some("RELEASED")
    );
    for rid in ["by-queue", "by-sweep", "cancelled"] {
        assert_eq!(app.confirm(1, rid).await.0, 200);
        lose_decision(&app, 1, rid, 0).await;
    }
    // Expired in MySQL, which is all the expiry paths read.
    let mut db = app.mysql().await;
    db.query_drop("UPDATE stock_deduct_idempotent SET expires_at_ms = 1")
        .await
        .unwrap();
    drop(db);

    let rid = stockd::domain::RequestId::parse("by-queue").unwrap();
    let now_ms = stockd::clock::unix_ms();
    let hold = lifecycle::SingleHold {
        sku_id: TestApp::sku(1),
        request_id: &rid,
    };
    let outcome = lifecycle::transition(
        &app.res.db,
        &app.res.redis,
        &hold,
        Transition::Expire,
        now_ms,
        &stockd::domain::Requester::Anyone,
    )
    .await
    .unwrap();
    assert!(
        matches!(&outcome, TransitionOutcome::Conflict { row } if row.status.as_str() == "CONFIRMED"),
        "{outcome:?}"
    );
    let (status, body) = app.cancel(1, "cancelled").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("RESERVATION_CONFIRMED")),
        "{body}"
    );
    let swept = Closer::from_resources(&app.res).sweep_once().await.unwrap();
    assert_eq!(
        (swept.released, swept.confirms_reapplied),
        (0, 1),
        "{swept:?}"
    );
    for rid in ["by-queue", "by-sweep", "cancelled"] {
        assert_eq!(
            app.ledger_status(1, rid).await.as_deref(),
            Some("CONFIRMED"),
            "{rid}"
        );
    }
    assert_eq!(app.mysql_available(1).await, Some(7));
    assert_eq!(app.redis_available(1).await, Some(7));
    app.finish_drained_and_conserved(1).await;
}
