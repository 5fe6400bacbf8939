//! Scenario 20: the consumer's link to MySQL partitioned in the middle of
//! its commits (the consumer in a network namespace of its own, MariaDB on
//! the root-side veth's address), 10 s in all, then healed:
//! - 4 s replies only: a `COMMIT` reaches MariaDB and is applied, its OK is
//!   lost — the commit's outcome is unknown to the consumer, which must not
//!   ack (nor dead-letter) the batch on a guess;
//! - 6 s both directions: a transaction may stay open in MariaDB holding
//!   the SKU row's lock until its connection's FIN gets through after the heal.
//!
//! The api keeps answering reserves (201: Redis and the broker are fine)
//! within its bounds, and confirm/cancel within the MySQL bound (503 while
//! the row is locked). After the heal the consumer's redeliveries find the
//! committed rows (duplicates, skipped) and apply the rest: every
//! acknowledged reservation in MySQL exactly once, audit clean, 0 oversold.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::partition::{self, count};
use super::{metrics, partition_run};
use crate::load::Op;
use crate::net::Link;
use crate::stack::DB_NAME;

const SKU: u64 = 201;
const COMMITS_UNKNOWN: Duration = Duration::from_secs(4);
const FULL_CUT: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s20_partition_consumer_mysql() {
    let title =
        "consumer <-> MySQL partitioned 10 s (commit replies lost, then both ways) under load";
    let mut sc = partition_run::begin("s20", title, &["consumer"], SKU).await;
    let mysql = sc.stack.mysql.server();
    let link = Link::to_server("consumer", mysql.place.ip, mysql.port);
    let steps = partition_run::replies_then_both(link, COMMITS_UNKNOWN, FULL_CUT);
    let mut p = partition_run::load_plan("s20", SKU, 720);
    p.confirm_share = 0.15;
    p.cancel_share = 0.15;
    let trx = OpenTransactions::start(&sc.stack);
    let phases = partition_run::play(&mut sc, p, &steps).await;
    let trx = trx.stop();
    let answers = &phases.report.answers;
    let publish_ms = sc.stack.settings.amqp.publish_timeout_ms;
    let redis_ms = partition::redis_call_ms(&sc);
    let reserve =
        partition_run::reserve_bound(publish_ms + redis_ms, &[200, 201, 202, 409], Some(201));
    let lifecycle_ms = partition::MYSQL_QUERY_TIMEOUT_MS + redis_ms;
    partition_run::judge_during(&mut sc, &phases, &reserve, lifecycle_ms);

    let (_, all) = partition_run::settle(&mut sc, &phases).await;
    let during = phases.during.of(answers, Op::Reserve);
    let lifecycle: Vec<_> = [Op::Confirm, Op::Cancel]
        .iter()
        .flat_map(|op| phases.during.of(answers, *op))
        .collect();
    let (in_mysql, acknowledged, oversold) = partition::settled_counts(&sc, &all).await;
    let consumed = metrics::consumer_outcomes(&sc).await;
    println!(
        "[s20] counts: acknowledged {acknowledged}; during the 10 s cut {} reserves: 201 {}, 202 {}; \
         {} confirms/cancels: 200 {}, 409 {}, 503 {}; MariaDB transactions seen open at once \
         up to {}, {} waiting for a lock, oldest {} s; consumer messages {consumed:?}; \
         acknowledged in MySQL {in_mysql} of {acknowledged}; oversold {oversold}",
        during.len(),
        count(&during, 201, None),
        count(&during, 202, None),
        lifecycle.len(),
        count(&lifecycle, 200, None),
        count(&lifecycle, 409, None),
        count(&lifecycle, 503, None),
        trx[0],
        trx[1],
        trx[2],
    );
    sc.expect(oversold == 0, format!("oversold = {oversold}"));
    sc.finish(&all).await;
}

/// Samples MariaDB's open transactions (`information_schema.innodb_trx`,
/// the harness's own left out) every 200 ms: the most open at once, the
/// most waiting for a lock at once, the oldest age in seconds.
struct OpenTransactions {
    seen: Arc<[AtomicI64; 3]>,
    task: tokio::task::JoinHandle<()>,
}

impl OpenTransactions {
    fn start(stack: &crate::stack::Stack) -> Self {
        let seen = Arc::new([AtomicI64::new(0), AtomicI64::new(0), AtomicI64::new(0)]);
        let url = stack.mysql.url(DB_NAME);
        let max = seen.clone();
        let task = tokio::spawn(async move {
            let pool = mysql_async::Pool::new(url.as_str());
            let sql =
                "SELECT COUNT(*), CAST(COALESCE(SUM(trx_state = 'LOCK WAIT'), 0) AS SIGNED), \
                       CAST(COALESCE(MAX(TIMESTAMPDIFF(SECOND, trx_started, NOW())), 0) AS SIGNED) \
                       FROM information_schema.innodb_trx \
                       WHERE trx_mysql_thread_id <> CONNECTION_ID()";
            loop {
                if let Ok(Ok(mut conn)) =
                    tokio::time::timeout(Duration::from_secs(2), pool.get_conn()).await
                {
                    let row: Result<Option<(i64, i64, i64)>, _> = conn.query_first(sql).await;
                    if let Ok(Some((open, waiting, oldest))) = row {
                        for (slot, v) in max.iter().zip([open, waiting, oldest]) {
                            slot.fetch_max(v, Ordering::SeqCst);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        Self { seen, task }
    }

    fn stop(self) -> [i64; 3] {
        self.task.abort();
        [0, 1, 2].map(|i| self.seen[i].load(Ordering::SeqCst))
    }
}
