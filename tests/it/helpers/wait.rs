//! Waiting on conditions (never a fixed sleep) and the SPEC §10 invariants a
//! test asserts once the pipeline drained.

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::TestApp;

impl TestApp {
    /// Polls `check` until it holds or `timeout` passes (then panics with `what`).
    pub async fn eventually<F, Fut>(&self, what: &str, timeout: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if check().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("timed out after {timeout:?} waiting for: {what}");
    }

    pub async fn wait_ledger_rows(&self, rows: u64) {
        self.eventually(
            &format!("{rows} ledger rows"),
            Duration::from_secs(20),
            || async { self.ledger_rows().await >= rows },
        )
        .await;
    }

    /// Waits until every outbox entry was confirmed and the work queue is empty.
    pub async fn wait_drained(&self, sku: u64) {
        let topology = self.res.publisher.topology().clone();
        self.eventually("pipeline drained", Duration::from_secs(30), || {
            let queue = topology.deduct_queue.clone();
            async move {
                let outbox = self.res.redis.outbox_len(Self::sku(sku)).await.unwrap();
                outbox == 0 && self.queue_depth(&queue).await == 0
            }
        })
        .await;
    }

    /// SPEC §10 invariants 1, 2, 7 for one SKU (call after draining).
    pub async fn assert_conserved(&self, sku: u64) {
        let mut conn = self.mysql().await;
        let (total, available): (i64, i64) = conn
            .exec_first(
                "SELECT total_stock, available_stock FROM sku_stock WHERE sku_id = ?",
                (sku,),
            )
            .await
            .unwrap()
            .expect("sku row");
        let live = stockd::db::ledger::live_units(&mut conn, Self::sku(sku))
            .await
            .unwrap();
        assert!(
            available >= 0,
            "invariant 1: MySQL available {available} < 0"
        );
        assert!(live <= total, "invariant 1: live {live} > total {total}");
        assert_eq!(total - available, live, "invariant 2: conservation");
        let redis = self
            .redis_available(sku)
            .await
            .expect("sku loaded in Redis");
        assert_eq!(redis, available, "invariant 7: Redis == MySQL after drain");
    }
}
