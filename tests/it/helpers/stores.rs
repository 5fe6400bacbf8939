//! Direct reads and writes of the test's own Redis keys, MySQL database and
//! RabbitMQ queues: what a test checks or breaks behind stockd's back.

use std::collections::HashMap;

use deadpool_redis::redis;
use lapin::options::BasicPublishOptions;
use mysql_async::prelude::Queryable;

use super::TestApp;

impl TestApp {
    /// A Redis connection as the admin (default) user, straight to the server
    /// or cluster: for the test's own reads and writes behind stockd's back.
    /// On a cluster it routes each command by its key, so a command may name
    /// keys of one SKU only (use [`Self::redis_del`] for several SKUs).
    pub async fn redis_conn(&self) -> stockd::redis::RedisLink {
        super::purge::admin_link(&self.direct_settings)
            .await
            .unwrap()
    }

    /// One connection per Redis node (every node of a cluster, replicas too):
    /// for commands about a node rather than a key (`PUBSUB`, `CLIENT KILL`).
    pub async fn redis_nodes(&self) -> Vec<redis::aio::MultiplexedConnection> {
        let mut nodes = Vec::new();
        for url in self.direct_settings.redis.node_urls() {
            let client = redis::Client::open(url.as_str()).unwrap();
            nodes.push(client.get_multiplexed_async_connection().await.unwrap());
        }
        nodes
    }

    /// Deletes `keys`, one command each (keys of several SKUs live in several
    /// slots of a cluster).
    pub async fn redis_del(&self, keys: &[String]) {
        let mut conn = self.redis_conn().await;
        for key in keys {
            let _: i64 = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }

    pub async fn redis_available(&self, sku: u64) -> Option<i64> {
        self.res
            .redis
            .skus()
            .sku(Self::sku(sku))
            .await
            .unwrap()
            .map(|s| s.available)
    }

    /// Every key of this test, from every primary.
    pub async fn redis_keys(&self) -> Vec<String> {
        super::purge::scan_keys(&self.direct_settings, &format!("{}:*", self.id))
            .await
            .unwrap()
    }

    pub async fn mysql(&self) -> mysql_async::Conn {
        self.direct_db.conn().await.unwrap()
    }

    pub async fn mysql_available(&self, sku: u64) -> Option<i64> {
        let mut conn = self.mysql().await;
        conn.exec_first(
            "SELECT available_stock FROM sku_stock WHERE sku_id = ?",
            (sku,),
        )
        .await
        .unwrap()
    }

    pub async fn ledger_rows(&self) -> u64 {
        let mut conn = self.mysql().await;
        conn.query_first("SELECT COUNT(*) FROM stock_deduct_idempotent")
            .await
            .unwrap()
            .unwrap_or(0)
    }

    /// Ledger rows of one SKU.
    pub async fn ledger_rows_of(&self, sku: u64) -> u64 {
        let mut conn = self.mysql().await;
        let sql = "SELECT COUNT(*) FROM stock_deduct_idempotent WHERE sku_id = ?";
        conn.exec_first(sql, (sku,)).await.unwrap().unwrap_or(0)
    }

    /// MySQL's `total_stock` of a SKU (it must exist).
    pub async fn mysql_total(&self, sku: u64) -> i64 {
        let mut conn = self.mysql().await;
        let sql = "SELECT total_stock FROM sku_stock WHERE sku_id = ?";
        conn.exec_first(sql, (sku,))
            .await
            .unwrap()
            .expect("sku row")
    }

    /// Entries in every outbox stream of this test (whatever SKU or bucket tag).
    pub async fn outbox_entries(&self) -> u64 {
        let mut conn = self.redis_conn().await;
        let mut entries = 0;
        for key in self.redis_keys().await {
            if key.ends_with(":outbox") {
                let len: u64 = redis::cmd("XLEN")
                    .arg(&key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                entries += len;
            }
        }
        entries
    }

    /// status -> (rows, units) of one SKU's ledger.
    pub async fn ledger_by_status(&self, sku: u64) -> HashMap<String, (u64, i64)> {
        let mut conn = self.mysql().await;
        let rows: Vec<(String, u64, i64)> = conn
            .exec(
                "SELECT status, COUNT(*), CAST(SUM(deduct_count) AS SIGNED)
                 FROM stock_deduct_idempotent WHERE sku_id = ? GROUP BY status",
                (sku,),
            )
            .await
            .unwrap();
        rows.into_iter().map(|(s, n, u)| (s, (n, u))).collect()
    }

    pub async fn ledger_status(&self, sku: u64, request_id: &str) -> Option<String> {
        let mut conn = self.mysql().await;
        conn.exec_first(
            "SELECT status FROM stock_deduct_idempotent WHERE sku_id = ? AND deduct_request_id = ?",
            (sku, request_id),
        )
        .await
        .unwrap()
    }

    /// Moves Redis `available` behind the service's back (failover / leak simulation).
    pub async fn redis_incr_available(&self, sku: u64, delta: i64) {
        let mut conn = self.redis_conn().await;
        let key = self.res.redis.keys().sku(Self::sku(sku));
        let _: i64 = redis::cmd("HINCRBY")
            .arg(&key)
            .arg("available")
            .arg(delta)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    pub async fn reconcile(&self, repair: bool) -> stockd::ops::reconcile::Report {
        self.reconciler.run_once(&[], repair).await.unwrap()
    }

    /// A connection of the test's own (named `name` on the broker) and a
    /// channel on it; the caller closes the connection.
    pub async fn broker_channel(&self, name: &str) -> (lapin::Connection, lapin::Channel) {
        let conn = super::purge::broker(&self.res.settings, name)
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        (conn, ch)
    }

    /// Messages ready in a queue (passive declare).
    pub async fn queue_depth(&self, queue: &str) -> u32 {
        let (conn, ch) = self.broker_channel("probe").await;
        let q = ch
            .queue_declare(
                queue.into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await
            .unwrap();
        let _ = conn.close(200, "".into()).await;
        q.message_count()
    }

    /// Publishes raw bytes to the reservations exchange (duplicate / poison tests).
    pub async fn publish_raw(&self, payload: &[u8]) {
        let topology = self.res.publisher.topology();
        self.res
            .publisher
            .publish(
                &topology.reservations_exchange,
                "",
                payload,
                lapin::BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .unwrap();
        let _ = BasicPublishOptions::default();
    }
}
