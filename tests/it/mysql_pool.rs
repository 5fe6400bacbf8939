//! The MySQL pool keeps its idle connections: a burst of concurrent
//! operations, then another, runs on the same server connections. (With
//! mysql_async's defaults every connection returned beyond `pool_min` was
//! closed, so each burst opened new ones: dozens a second under load.)

use std::collections::BTreeSet;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::helpers::TestApp;

/// The server-side ids of `n` connections checked out at once, then returned.
async fn burst(db: &stockd::db::Db, n: usize) -> BTreeSet<u64> {
    let mut conns = Vec::new();
    for _ in 0..n {
        conns.push(db.conn().await.unwrap());
    }
    let mut ids = BTreeSet::new();
    for conn in &mut conns {
        let id: Option<u64> = conn.query_first("SELECT CONNECTION_ID()").await.unwrap();
        ids.insert(id.unwrap());
    }
    drop(conns);
    ids
}

/// Returned connections reach the pool's idle list through its recycler task;
/// give it time to run before the next burst asks for them. No condition to
/// poll: `Db` keeps its pool (and the pool's idle count) to itself, and the
/// recycler's hand-over tells the server nothing (no reset, no transaction).
/// 100 ms is far more than the task needs and no longer than a poll period.
async fn let_the_recycler_run() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

#[tokio::test]
async fn concurrent_bursts_reuse_the_pools_connections() {
    let app = TestApp::spawn().await;
    // A pool of its own: the app's background tasks share the app's.
    let db = &stockd::db::Db::new(&app.res.settings.mysql).unwrap();
    let first = burst(db, 4).await;
    assert_eq!(first.len(), 4);
    for round in 0..3 {
        let_the_recycler_run().await;
        let again = burst(db, 4).await;
        assert_eq!(again, first, "burst {round} ran on new connections");
    }
    db.clone().disconnect().await;
    app.cleanup().await;
}

/// A write transaction its client abandoned without a word (a partition: the
/// server sees no FIN, no RST) is rolled back by MariaDB once idle for twice
/// `mysql.query_timeout_ms`, so the SKU row lock it held is free again — not
/// held until `wait_timeout` (chaos s20 saw every confirm of the SKU time out).
#[tokio::test]
async fn an_abandoned_write_transaction_is_rolled_back_by_the_server() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let mut settings = app.res.settings.mysql.clone();
    settings.query_timeout_ms = 400;
    let expected = stockd::db::pool::idle_write_transaction_timeout_secs(400);
    assert_eq!(expected, 1);
    let db = stockd::db::Db::new(&settings).unwrap();
    let mut conn = db.conn().await.unwrap();
    let session: Option<u64> = conn
        .query_first("SELECT @@SESSION.idle_write_transaction_timeout")
        .await
        .unwrap();
    assert_eq!(session, Some(expected));
    let mut tx = conn
        .start_transaction(mysql_async::TxOpts::default())
        .await
        .unwrap();
    tx.exec_drop(
        "SELECT available_stock FROM sku_stock WHERE sku_id = ? FOR UPDATE",
        (TestApp::sku(1).get(),),
    )
    .await
    .unwrap();
    tx.exec_drop(
        "UPDATE sku_stock SET version = version + 1 WHERE sku_id = ?",
        (TestApp::sku(1).get(),),
    )
    .await
    .unwrap();
    // The client now goes silent, holding the transaction (and the row lock).
    let app_ref = &app;
    app.eventually(
        "the SKU row lock of the abandoned transaction is free",
        Duration::from_secs(10),
        || async move {
            {
                let mut probe = app_ref.mysql().await;
                let mut tx = probe
                    .start_transaction(mysql_async::TxOpts::default())
                    .await
                    .unwrap();
                // NOWAIT: refused at once while another transaction holds it.
                let locked = tx
                    .exec_drop(
                        "SELECT available_stock FROM sku_stock WHERE sku_id = ? FOR UPDATE NOWAIT",
                        (TestApp::sku(1).get(),),
                    )
                    .await;
                tx.rollback().await.unwrap();
                locked.is_ok()
            }
        },
    )
    .await;
    drop(tx);
    drop(conn);
    db.disconnect().await;
    app.cleanup().await;
}
