//! Expiries released in batches (issue 55, `lifecycle::expire_many`): one
//! transaction and one Redis call per SKU bucket for many expiries, with the
//! single transition's one-winner rule for each.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use stockd::domain::{Deduction, RequestId, UserId};
use stockd::roles::closer::Closer;

use crate::helpers::{TestApp, TestOptions};

/// Stamps are whole milliseconds; a few more than one absorb the rounding.
const CLOCK_ROUNDING: Duration = Duration::from_millis(5);

/// The expiry message of reservation `rid` of user `user` (one unit of SKU 1).
fn expiry(rid: &str, user: u64) -> Deduction {
    Deduction {
        request_id: RequestId::parse(rid).unwrap(),
        sku_id: TestApp::sku(1),
        user_id: UserId::new(user).unwrap(),
        count: 1,
        created_ms: 0,
        expires_ms: 0,
        order: None,
        client: None,
    }
}

/// Long enough for a request to reach the SKU row's lock on a loaded test
/// machine (a test's MySQL user may not read the server's lock waits).
const QUEUE_UP: Duration = Duration::from_millis(1500);

/// A batch of three due expiries in which one loses its race to a confirm:
/// the test holds the SKU row (the lock protocol's first lock); the confirm
/// of `r1` queues for it, then the batch reads `r1` as RESERVED and queues
/// behind. The confirm commits first, so the batch, deciding under its lock,
/// releases `r0` and `r2` and leaves `r1` CONFIRMED — in both stores.
#[tokio::test]
async fn a_batch_releases_the_others_when_one_expiry_loses_to_a_confirm() {
    let app = TestApp::with(TestOptions {
        ttl_secs: 1,
        closer: false,
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 10).await;
    for i in 0..3 {
        app.reserve_ok(1, &format!("r{i}"), i + 1, 1).await;
    }
    let expires_by = Instant::now() + Duration::from_secs(1);
    app.wait_ledger_rows(3).await;
    tokio::time::sleep_until((expires_by + CLOCK_ROUNDING).into()).await;

    let mut holder = app.mysql().await;
    let mut tx = holder
        .start_transaction(mysql_async::TxOpts::default())
        .await
        .unwrap();
    let sku = TestApp::sku(1).get();
    tx.exec_drop(
        "SELECT available_stock FROM sku_stock WHERE sku_id = ? FOR UPDATE",
        (sku,),
    )
    .await
    .unwrap();
    let closer = Closer::from_resources(&app.res);
    let msgs = [expiry("r0", 1), expiry("r1", 2), expiry("r2", 3)];
    let batch = async {
        tokio::time::sleep(QUEUE_UP).await; // the confirm queues first
        closer.expire_many(&msgs).await
    };
    let release = async {
        tokio::time::sleep(QUEUE_UP * 2).await; // then the batch, past its read
        tx.commit().await.unwrap();
    };
    let ((status, body), expired, ()) = tokio::join!(app.confirm(1, "r1"), batch, release);
    expired.unwrap();
    assert_eq!(
        (status, &body["status"]),
        (200, &"CONFIRMED".into()),
        "{body}"
    );

    let by_status = app.ledger_by_status(1).await;
    assert_eq!(by_status.get("CONFIRMED"), Some(&(1, 1)), "{by_status:?}");
    assert_eq!(by_status.get("RELEASED"), Some(&(2, 2)), "{by_status:?}");
    assert_eq!(app.mysql_available(1).await, Some(9));
    app.eventually("Redis mirrored", Duration::from_secs(5), || async {
        app.redis_available(1).await == Some(9)
    })
    .await;
    // The batch's expiry of r1 again, and of the others: repeats, no change.
    closer.expire_many(&msgs).await.unwrap();
    assert_eq!(app.mysql_available(1).await, Some(9));
    app.finish_drained_and_conserved(1).await;
}
