//! The one comparison of the stores (`stockd::ops::compare`), which the
//! reconciler, `stockd audit`'s `stores_agree` and the load generator's check
//! after a drain all read: work in flight is explained net of in flight but
//! shows as read, and a drift injected into Redis gives its verdict.

use stockd::ops::compare::{compare, Comparison, Standing, StoreVerdict};

use crate::helpers::TestApp;

/// Winners listed, as the reconciler's default `reconcile.max_winners`.
const WINNERS: usize = 5_000;

async fn compared(app: &TestApp, max_winners: usize) -> Comparison {
    compare(&app.res.db, &app.res.redis, TestApp::sku(1), max_winners)
        .await
        .unwrap()
}

fn verdict(standing: Standing, drift: i64, gap: Option<i64>) -> StoreVerdict {
    StoreVerdict {
        standing,
        drift,
        gap,
    }
}

#[tokio::test]
async fn in_flight_work_drain_and_an_injected_drift_each_give_their_verdict() {
    let mut app = TestApp::spawn_with_sku(1, 10, 5).await;
    // Taken by Redis, not applied by MySQL: in flight, and a gap as read.
    app.stop_consumer().await;
    app.reserve_ok(1, "in-flight", 1, 2).await;
    let now = compared(&app, WINNERS).await;
    assert_eq!((now.in_flight, now.exact), (2, true));
    assert_eq!(now.verdict(), verdict(Standing::InFlight, 0, Some(-2)));
    // Counters only (the audit's and the bench's reading): the same gap.
    let counters = compared(&app, 0).await;
    assert!(!counters.exact);
    assert_eq!(counters.verdict().gap, Some(-2));
    // Drained: the stores agree.
    app.start_consumer();
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    let drained = compared(&app, WINNERS).await;
    assert_eq!(drained.verdict(), verdict(Standing::Agree, 0, Some(0)));
    assert_eq!((drained.mysql_available, drained.ledger_units), (8, 2));
    // Redis moved behind the service's back: lost writes, 3 units ahead.
    app.redis_incr_available(1, 3).await;
    let ahead = compared(&app, WINNERS).await;
    assert_eq!(ahead.verdict(), verdict(Standing::RedisAhead, 3, Some(3)));
    assert_eq!(compared(&app, 0).await.verdict().gap, Some(3));
    // Redis lost the SKU: nothing to compare as read, behind by all of it.
    let key = app.res.redis.keys().sku(TestApp::sku(1));
    app.redis_del(&[key]).await;
    let lost = compared(&app, WINNERS).await;
    assert_eq!(lost.verdict(), verdict(Standing::RedisBehind, -8, None));
    app.cleanup().await;
}

/// The load generator's check after a drain reads the same comparison: clean
/// once drained, and a drift injected into Redis is named as both a wrong
/// Redis figure and Redis apart from MySQL.
#[tokio::test]
async fn the_bench_check_after_a_drain_reads_the_comparison() {
    use stockd_bench::stack::check::{stores_after_drain, Expect};
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.reserve_ok(1, "taken", 1, 2).await;
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    let expect = Expect {
        sku: TestApp::sku(1),
        total: 10,
        admitted: 2,
    };
    let bad = stores_after_drain(&app.res.db, &app.res.redis, expect).await;
    assert!(bad.is_empty(), "{bad:?}");
    app.redis_incr_available(1, 3).await;
    let bad = stores_after_drain(&app.res.db, &app.res.redis, expect).await;
    assert_eq!(
        bad,
        [
            "Redis available: 11, expected 8",
            "MySQL available (== Redis after drain): 8, expected 11"
        ]
    );
    app.cleanup().await;
}
