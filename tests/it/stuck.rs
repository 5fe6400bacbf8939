//! The reconciler's STUCK verdict (contract §8): deductions in the deduct DLQ, or
//! reservations Redis took that MySQL still lacks past
//! `reconcile.stuck_after_ms`, are reported with their units and where they sit.

use std::time::{Duration, Instant};

use stockd::ops::reconcile::{Reconciler, Verdict};

use crate::helpers::TestApp;

/// A deduction sitting in the deduct DLQ makes its SKU STUCK (`dlq`) at once,
/// `stockd reconcile --once` exits 1, and a replay brings it back to OK.
#[tokio::test]
async fn a_dead_lettered_deduction_makes_its_sku_stuck() {
    let mut app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    app.reserve_and_lose_the_message(1, "d1", 4, 3).await;
    let deduction = app.deduction_of(1, "d1").await;
    app.dead_letter(&[deduction], "retries_exhausted", 6).await;
    let report = app.reconcile(false).await;
    let line = &report.skus[0];
    assert_eq!(
        (line.verdict, line.stuck_units, line.stuck_where),
        (Verdict::Stuck, 3, Some("dlq")),
        "{line:?}"
    );
    assert_eq!(line.in_flight, 3);
    assert_eq!(report.skus[1].verdict, Verdict::Ok, "SKU 2 is not affected");
    assert!(!report.healthy());
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["skus"][0]["verdict"], "STUCK");
    assert_eq!(json["skus"][0]["stuck_where"], "dlq");
    let run = app.stockd(&["reconcile", "--once", "--json"], &[]).await;
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.json()["skus"][0]["stuck_units"], 3);
    assert_eq!(app.dlq_depth().await, 1, "the reconciler only looked");

    let run = app.stockd(&["dlq", "replay"], &[]).await;
    assert_eq!(run.code, 0, "{run:?}");
    app.start_consumer();
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    let after = app.reconcile(false).await;
    assert_eq!(after.skus[0].verdict, Verdict::Ok, "{:?}", after.skus[0]);
    app.cleanup().await;
}

/// A reservation whose deduction message was lost stays IN_FLIGHT while it is
/// young and turns STUCK (`in_flight`) once older than `stuck_after_ms`.
#[tokio::test]
async fn an_in_flight_reservation_older_than_the_bound_is_stuck() {
    const STUCK_AFTER_MS: u64 = 1_500;
    /// Stamps are whole milliseconds; a few more than one absorb the rounding.
    const CLOCK_ROUNDING: Duration = Duration::from_millis(5);
    let mut app = TestApp::spawn().await;
    let mut settings = app.res.settings.reconcile.clone();
    settings.stuck_after_ms = STUCK_AFTER_MS;
    let reconciler = Reconciler::new(app.res.db.clone(), app.res.redis.clone(), &settings, vec![])
        .with_dead_letters(app.res.publisher.clone());
    app.create_sku(1, 10, 5).await;
    app.reserve_and_lose_the_message(1, "lost", 9, 2).await;
    // The reservation was stamped (`created_ms`) before this instant.
    let reserved_by = Instant::now();
    let young = reconciler.run_once(&[], false).await.unwrap();
    assert_eq!(
        young.skus[0].verdict,
        Verdict::InFlight,
        "{:?}",
        young.skus[0]
    );
    assert_eq!(young.skus[0].stuck_units, 0);
    // About time itself: no event marks the reservation ageing past
    // `stuck_after_ms`, so wait out the rest of that span — from when it was
    // stamped, not from now — plus the ms clock's rounding (the check is
    // strictly older). Still STUCK-less here would fail the assertion below.
    let aged_by = reserved_by + Duration::from_millis(STUCK_AFTER_MS) + CLOCK_ROUNDING;
    tokio::time::sleep_until(aged_by.into()).await;
    let old = reconciler.run_once(&[], false).await.unwrap();
    let line = &old.skus[0];
    assert_eq!(
        (line.verdict, line.stuck_units, line.stuck_where),
        (Verdict::Stuck, 2, Some("in_flight")),
        "{line:?}"
    );
    app.cleanup().await;
}
