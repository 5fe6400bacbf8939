//! Strawman: the seed's "before" design. Per request one MySQL transaction:
//! `SELECT available ... FOR UPDATE` on the one hot row, then `UPDATE` it, then
//! commit. Every buyer queues on that row lock (and on the commit's fsync), so
//! adding requesters adds waiting, not throughput.
//!
//! It runs on a bench-only table in the bench database, never on stockd's
//! tables. MariaDB here allows 151 connections (`max_connections`), so 1,000
//! concurrent requesters share a pool of [`POOL_MAX`] connections and queue for
//! them, as a 1,000-thread application server in front of one database would.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Pool, PoolConstraints, PoolOpts, TxOpts};

use super::Checked;
use crate::drive::load::{drive, Plan, Requester};
use crate::measure::stats::Outcome;
use crate::results::PhaseResult;
use crate::stack::check::{self, Expect};
use crate::stack::namespace::Namespace;
use stockd::domain::SkuId;

/// Largest pool the strawman opens: below `max_connections` (151) with room left
/// for stockd, the bench's own pools and anyone else on this MariaDB.
pub const POOL_MAX: usize = 100;
/// The hot row's id in `bench_strawman_stock`.
const HOT_ROW: u32 = 1;
/// Time to open every pooled connection before measuring.
const POOL_WARM_TIMEOUT: Duration = Duration::from_secs(30);

struct Buyer {
    pool: Pool,
}

impl Requester for Buyer {
    async fn call(&mut self, _index: u64) -> Outcome {
        match buy_one(&self.pool).await {
            Ok(true) => Outcome::done("ok"),
            Ok(false) => Outcome::refused("sold_out"),
            Err(err) => Outcome::failed(format!("mysql: {err}")),
        }
    }
}

/// One request of the seed's design: lock, check, decrement, commit.
async fn buy_one(pool: &Pool) -> Result<bool, mysql_async::Error> {
    let mut conn = pool.get_conn().await?;
    let mut tx = conn.start_transaction(TxOpts::default()).await?;
    let available: Option<i64> = tx
        .exec_first(
            "SELECT available FROM bench_strawman_stock WHERE id = ? FOR UPDATE",
            (HOT_ROW,),
        )
        .await?;
    let bought = available.unwrap_or(0) > 0;
    if bought {
        tx.exec_drop(
            "UPDATE bench_strawman_stock SET available = available - 1, version = version + 1
             WHERE id = ?",
            (HOT_ROW,),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(bought)
}

/// Runs the strawman with `requesters` concurrent buyers; returns the result and
/// its violations (stock taken must equal the successful transactions).
pub async fn run(
    ns: &Namespace,
    key: &'static str,
    plan: Plan,
    requesters: usize,
) -> anyhow::Result<Checked> {
    let connections = requesters.min(POOL_MAX);
    let constraints = PoolConstraints::new(connections, connections).expect("min == max");
    let opts =
        mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&ns.settings.mysql.url)?)
            .pool_opts(PoolOpts::default().with_constraints(constraints));
    let pool = Pool::new(opts);
    let total = i64::try_from(plan.requests)?;
    reset_table(&pool, total).await?;
    warm_pool(&pool, connections).await?;
    let workers = (0..requesters)
        .map(|_| Buyer { pool: pool.clone() })
        .collect();
    let run = drive(key, plan, workers).await;
    let expect = Expect {
        sku: SkuId::new(u64::from(HOT_ROW))?,
        total,
        admitted: run.tally.done as i64,
    };
    let mut violations = check::answers(expect, &run.tally);
    let mut conn = pool.get_conn().await?;
    let left: Option<i64> = conn
        .exec_first(
            "SELECT available FROM bench_strawman_stock WHERE id = ?",
            (HOT_ROW,),
        )
        .await?;
    drop(conn);
    if left != Some(total - run.tally.done as i64) {
        violations.push(format!(
            "strawman: {left:?} left of {total} after {} purchases",
            run.tally.done
        ));
    }
    pool.disconnect().await?;
    let title = format!(
        "MySQL SELECT FOR UPDATE + UPDATE per request, {requesters} requesters on {connections} connections"
    );
    let result = PhaseResult::from_run(key, title, "tx/s", requesters, &run);
    Ok(Checked::one(result, violations))
}

async fn reset_table(pool: &Pool, total: i64) -> anyhow::Result<()> {
    let mut conn = pool.get_conn().await?;
    conn.query_drop(
        "CREATE TABLE IF NOT EXISTS bench_strawman_stock (
           id INT UNSIGNED NOT NULL PRIMARY KEY,
           available BIGINT NOT NULL,
           version BIGINT UNSIGNED NOT NULL DEFAULT 0
         ) ENGINE=InnoDB",
    )
    .await?;
    conn.exec_drop(
        "REPLACE INTO bench_strawman_stock (id, available, version) VALUES (?, ?, 0)",
        (HOT_ROW, total),
    )
    .await?;
    Ok(())
}

/// Opens every pooled connection up front, so the measurement has no connects.
async fn warm_pool(pool: &Pool, connections: usize) -> anyhow::Result<()> {
    let opens = (0..connections).map(|_| pool.get_conn());
    let conns = tokio::time::timeout(POOL_WARM_TIMEOUT, futures_util::future::try_join_all(opens))
        .await??;
    drop(conns);
    Ok(())
}
