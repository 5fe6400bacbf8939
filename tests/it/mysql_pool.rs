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
/// give it time to run before the next burst asks for them.
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
