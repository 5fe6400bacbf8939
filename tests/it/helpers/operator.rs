//! Shortcuts of the operator-tool tests (audit, dead letters, STUCK): run the
//! `stockd` binary against this test's own stores, put messages straight into
//! a queue, and fake what a failure leaves behind.

#![allow(dead_code)]

use deadpool_redis::redis;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::BasicProperties;
use mysql_async::prelude::Queryable;

use stockd::domain::Deduction;
use stockd::mq::dlq::{ATTEMPT_HEADER, REASON_HEADER};

use super::TestApp;

/// What a `stockd` child process did.
#[derive(Debug)]
pub struct CliRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliRun {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// Whether a finished child process succeeded, and its stdout then stderr
/// as one text (what a failing assertion shows).
pub fn success_and_output(out: &std::process::Output) -> (bool, String) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

impl TestApp {
    /// `STOCKD__…` variables that point a `stockd` process at this test's
    /// database, key prefix and queue names.
    pub fn cli_env(&self) -> Vec<(String, String)> {
        let s = &self.res.settings;
        vec![
            ("STOCKD_ENV".into(), "test".into()),
            ("STOCKD__MYSQL__URL".into(), s.mysql.url.clone()),
            ("STOCKD__REDIS__URL".into(), s.redis.url.clone()),
            (
                "STOCKD__REDIS__MODE".into(),
                match s.redis.mode {
                    stockd::config::RedisMode::Standalone => "standalone".into(),
                    stockd::config::RedisMode::Cluster => "cluster".into(),
                },
            ),
            ("STOCKD__REDIS__URLS".into(), s.redis.urls.join(",")),
            ("STOCKD__AMQP__URLS".into(), s.amqp.urls.join(",")),
            (
                "STOCKD__REDIS__KEY_PREFIX".into(),
                s.redis.key_prefix.clone(),
            ),
            ("STOCKD__AMQP__URL".into(), s.amqp.url.clone()),
            (
                "STOCKD__AMQP__QUEUE_PREFIX".into(),
                s.amqp.queue_prefix.clone(),
            ),
            (
                "STOCKD__RESERVATION__TTL_SECS".into(),
                s.reservation.ttl_secs.to_string(),
            ),
        ]
    }

    /// Runs `stockd <args>` with [`TestApp::cli_env`] plus `extra` variables.
    pub async fn stockd(&self, args: &[&str], extra: &[(&str, &str)]) -> CliRun {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stockd"));
        cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
        for (k, v) in self.cli_env() {
            cmd.env(k, v);
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
        // Off the test's runtime thread: the in-process roles keep running.
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        CliRun {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Publishes straight into `queue` (default exchange), with a confirm.
    pub async fn publish_to_queue(&self, queue: &str, payload: &[u8], props: BasicProperties) {
        self.res
            .publisher
            .publish("", queue, payload, props.with_delivery_mode(2))
            .await
            .unwrap();
    }

    /// Puts `msgs` into the deduct DLQ as one message, as the consumer would
    /// after using up the retries.
    pub async fn dead_letter(&self, msgs: &[Deduction], reason: &str, attempt: u32) {
        let mut headers = FieldTable::default();
        headers.insert(
            REASON_HEADER.into(),
            AMQPValue::LongString(LongString::from(reason)),
        );
        headers.insert(ATTEMPT_HEADER.into(), AMQPValue::LongUInt(attempt));
        let id = stockd::mq::message::message_id_of(msgs).unwrap();
        let props = BasicProperties::default()
            .with_message_id(id.into())
            .with_headers(headers);
        let dlq = self.res.publisher.topology().deduct_dlq.clone();
        let body = stockd::mq::message::encode(msgs);
        self.publish_to_queue(&dlq, &body, props).await;
    }

    /// Removes every ready message of `queue` (a lost message); returns how many.
    pub async fn purge_queue(&self, queue: &str) -> u32 {
        let (conn, ch) = self.broker_channel("purge").await;
        let purged = ch
            .queue_purge(queue.into(), lapin::options::QueuePurgeOptions::default())
            .await
            .unwrap();
        let _ = conn.close(200, "".into()).await;
        purged
    }

    /// The deduction message of a reservation, rebuilt from its Redis record.
    pub async fn deduction_of(&self, sku: u64, request_id: &str) -> Deduction {
        let rid = stockd::domain::RequestId::parse(request_id).unwrap();
        let r = self
            .res
            .redis
            .reservations()
            .reservation(Self::sku(sku), &rid)
            .await
            .unwrap()
            .expect("reservation record in Redis");
        Deduction {
            request_id: r.request_id,
            sku_id: r.sku_id,
            user_id: r.user_id,
            count: r.count,
            created_ms: r.created_at_ms,
            expires_ms: r.expires_at_ms,
            order: None,
            client: None,
        }
    }

    /// Reserves with the consumer stopped and drops the deduction message, so
    /// Redis holds the reservation and MySQL never hears of it. The consumer
    /// is left stopped.
    pub async fn reserve_and_lose_the_message(
        &mut self,
        sku: u64,
        rid: &str,
        user: u64,
        count: u32,
    ) {
        self.stop_consumer().await;
        let resp = self.reserve(sku, rid, user, count).await;
        assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
        let queue = self.res.publisher.topology().deduct_queue.clone();
        // Once the outbox entry is gone the relay cannot republish it.
        let wait = std::time::Duration::from_secs(10);
        self.eventually("outbox emptied after the confirm", wait, || async {
            self.res.redis.outbox().len(Self::sku(sku)).await.unwrap() == 0
        })
        .await;
        assert!(
            self.purge_queue(&queue).await >= 1,
            "the deduction message was queued"
        );
    }

    /// Runs one SQL statement against this test's database.
    pub async fn sql(&self, statement: &str) {
        let mut conn = self.mysql().await;
        conn.query_drop(statement).await.unwrap();
    }

    /// Runs one Redis command (arguments as strings).
    pub async fn redis_cmd(&self, args: &[&str]) {
        let mut conn = self.redis_conn().await;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let _: redis::Value = cmd.query_async(&mut conn).await.unwrap();
    }

    pub async fn dlq_depth(&self) -> u32 {
        let dlq = self.res.publisher.topology().deduct_dlq.clone();
        self.queue_depth(&dlq).await
    }
}
