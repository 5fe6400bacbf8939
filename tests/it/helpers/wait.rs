//! Waiting on conditions (never a fixed sleep) and the contract §10 invariants a
//! test asserts once the pipeline drained.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;

use super::TestApp;

/// How often a condition is polled: the wait ends on the condition, this only
/// bounds the polling cost (not a fixed sleep of a test).
const POLL: Duration = Duration::from_millis(50);

/// Consecutive polls a drained pipeline must be seen on: a delivery on the
/// wire from the broker to the consumer (no longer ready, not yet taken off
/// the stream) lasts far less than one poll period.
const DRAINED_POLLS: u32 = 2;

/// Polls `check` until it holds (true) or `timeout` passes (false).
pub async fn poll_until<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    loop {
        if check().await {
            return true;
        }
        if start.elapsed() >= timeout {
            return false;
        }
        // The poll period of this bounded wait (see POLL), not a fixed wait.
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` until it holds on `DRAINED_POLLS` consecutive polls (true)
/// or `timeout` passes (false): for "nothing in flight", where one look can
/// fall between a broker's delivery and the consumer taking it.
pub async fn poll_until_steady<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let seen = AtomicU32::new(0);
    poll_until(timeout, || {
        let now = check();
        let seen = &seen;
        async move {
            if !now.await {
                seen.store(0, Ordering::SeqCst);
                return false;
            }
            seen.fetch_add(1, Ordering::SeqCst) + 1 >= DRAINED_POLLS
        }
    })
    .await
}

impl TestApp {
    /// Polls `check` until it holds or `timeout` passes (then panics with `what`).
    pub async fn eventually<F, Fut>(&self, what: &str, timeout: Duration, check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        if !poll_until(timeout, check).await {
            panic!("timed out after {timeout:?} waiting for: {what}");
        }
    }

    pub async fn wait_ledger_rows(&self, rows: u64) {
        self.eventually(
            &format!("{rows} ledger rows"),
            Duration::from_secs(20),
            || async { self.ledger_rows().await >= rows },
        )
        .await;
    }

    /// Waits until every outbox entry was confirmed and the work queue holds
    /// nothing ready or unacked: the broker's count (passive declare) is the
    /// ready messages only, so the unacked ones are the consumer's count of
    /// deliveries taken off its stream and not yet settled — the batch it
    /// collects or applies. Seen on consecutive polls.
    pub async fn wait_drained(&self, sku: u64) {
        let queue = self.res.publisher.topology().deduct_queue.clone();
        let drained = poll_until_steady(Duration::from_secs(30), || async {
            self.consumer_in_hand() == 0
                && self.res.redis.outbox().len(Self::sku(sku)).await.unwrap() == 0
                && self.queue_depth(&queue).await == 0
                && self.consumer_in_hand() == 0
        })
        .await;
        assert!(drained, "timed out after 30s waiting for: pipeline drained");
    }

    /// The usual end of a test of one SKU: the pipeline drained, then
    /// everything the test created removed.
    pub async fn finish_drained(self, sku: u64) {
        self.wait_drained(sku).await;
        self.cleanup().await;
    }

    /// The end of a test that drained already: the §10 invariants hold for
    /// `sku` ([`Self::assert_conserved`]), then everything removed.
    pub async fn finish_conserved(self, sku: u64) {
        self.assert_conserved(sku).await;
        self.cleanup().await;
    }

    /// The usual end of a test of one SKU: the pipeline drained, the §10
    /// invariants hold ([`Self::assert_conserved`]), everything removed.
    pub async fn finish_drained_and_conserved(self, sku: u64) {
        self.wait_drained(sku).await;
        self.finish_conserved(sku).await;
    }

    /// Waits until `n` subscribers listen on this test's sold-out channel.
    pub async fn wait_subscribers(&self, n: u64) {
        // A server-wide probe: the admin connection (stockd's user has no
        // PUBSUB). Counts are per node, so a cluster's nodes are summed.
        let nodes = self.redis_nodes().await;
        let channel = self.res.redis.keys().soldout_channel();
        let what = format!("{n} subscribers on {channel}");
        self.eventually(&what, Duration::from_secs(10), || {
            let mut nodes = nodes.clone();
            let channel = channel.clone();
            async move {
                let mut total = 0;
                for conn in &mut nodes {
                    let counts: Vec<(String, u64)> = deadpool_redis::redis::cmd("PUBSUB")
                        .arg("NUMSUB")
                        .arg(&channel)
                        .query_async(conn)
                        .await
                        .unwrap_or_default();
                    total += counts.first().map_or(0, |(_, c)| *c);
                }
                total >= n
            }
        })
        .await;
    }

    /// contract §10 invariants 1, 2, 7 for one SKU (call after draining).
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
