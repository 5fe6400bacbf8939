//! Correctness after every phase: a fast wrong answer is a failure. Each check
//! returns the violated invariants as sentences (empty = all green); the suite
//! stops loudly on the first phase with any.
//!
//! With a child stockd the bench reads both stores directly (contract §10: no
//! oversell, conservation, Redis == MySQL after drain, nothing rejected); the
//! stores are compared by the library's one comparison
//! (`stockd::ops::compare`), the one the reconciler and `stockd audit` read.
//! With `--target` only what HTTP shows can be checked.

use std::net::SocketAddr;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::drive::api::{Api, Reserver, UserOf};
use crate::measure::stats::Tally;
use stockd::db::{sku, Db};
use stockd::domain::SkuId;
use stockd::ops::compare::compare;
use stockd::redis::RedisStore;

/// Longest wait for the pipeline (outbox → broker → consumer → MySQL) to drain
/// after a phase. A bench backlog usually takes seconds; the orders phase on a
/// slow day took over a minute (docs/benchmarks-history.md, "Orders").
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(180);
/// Drain poll period: one primary-key read of `sku_stock` each time.
const DRAIN_POLL: Duration = Duration::from_millis(20);
/// Winners the comparison lists: none, the drained check reads the counters.
const COUNTERS_ONLY: usize = 0;

/// Where the HTTP phases send load, and how their result can be checked.
pub struct Target<'a> {
    pub addr: SocketAddr,
    pub admin_token: &'a str,
    /// Client token of the public calls (`--token`); `None` for a target with
    /// `auth.required` false (every child stockd).
    pub client_token: Option<&'a str>,
    /// Direct access to the stores (a child stockd in the bench namespace);
    /// `None` with `--target`, where only HTTP is visible.
    pub stores: Option<&'a Stores>,
}

impl<'a> Target<'a> {
    /// A child stockd of the bench namespace, its stores read directly.
    pub fn child(addr: SocketAddr, admin_token: &'a str, stores: &'a Stores) -> Self {
        Self {
            addr,
            admin_token,
            client_token: None,
            stores: Some(stores),
        }
    }

    /// Admin and read calls against the target, with its tokens.
    pub fn api(&self) -> Api {
        Api::new(self.addr, self.admin_token).with_client_token(self.client_token)
    }

    /// A reservation worker against the target, with its client token.
    pub fn reserver(&self, sku: u64, tag: &str, users: UserOf) -> Reserver {
        Reserver::new(self.addr, sku, tag, users).with_client_token(self.client_token)
    }
}

/// The bench namespace's MySQL and Redis, read directly by the checks.
pub struct Stores {
    pub db: Db,
    pub redis: RedisStore,
}

/// Every check that applies after an HTTP phase on `target`.
pub async fn after_phase(target: &Target<'_>, expect: Expect, tally: &Tally) -> Vec<String> {
    let mut bad = answers(expect, tally);
    bad.extend(match target.stores {
        Some(stores) => stores_after_drain(&stores.db, &stores.redis, expect).await,
        None => over_http(&mut target.api(), expect).await,
    });
    bad
}

/// What one SKU should look like after a phase.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub sku: SkuId,
    pub total: i64,
    /// Units the phase was told were reserved (201/202 answers, one unit each).
    pub admitted: i64,
}

/// Violations visible in the answers themselves: failures and oversell.
pub fn answers(expect: Expect, tally: &Tally) -> Vec<String> {
    let mut bad = Vec::new();
    if tally.failed > 0 {
        let failed: Vec<String> = tally
            .failures
            .iter()
            .map(|(label, n)| format!("{n} × {label}"))
            .collect();
        bad.push(format!(
            "{} requests failed (5xx/transport/unexpected): {}",
            tally.failed,
            failed.join(", ")
        ));
    }
    if expect.admitted > expect.total {
        bad.push(format!(
            "oversell: {} units answered as reserved, only {} exist",
            expect.admitted, expect.total
        ));
    }
    bad
}

/// Waits for MySQL to hold every admitted unit, then checks both stores.
pub async fn stores_after_drain(db: &Db, redis: &RedisStore, expect: Expect) -> Vec<String> {
    match stores_inner(db, redis, expect).await {
        Ok(bad) => bad,
        Err(err) => vec![format!("could not read the stores: {err:#}")],
    }
}

async fn stores_inner(db: &Db, redis: &RedisStore, e: Expect) -> anyhow::Result<Vec<String>> {
    let mut bad = Vec::new();
    let drained = wait_until(DRAIN_TIMEOUT, DRAIN_POLL, || async {
        match mysql_available(db, e.sku).await {
            Ok(available) => e.total - available >= e.admitted,
            Err(_) => false,
        }
    })
    .await;
    // The one comparison of the stores (the reconciler's and `stockd audit`'s),
    // read as a drained pipeline leaves it: Redis' available as MySQL's.
    let compared = compare(db, redis, e.sku, COUNTERS_ONLY).await?;
    let (mysql, live) = (compared.mysql_available, compared.ledger_units);
    if !drained {
        bad.push(format!(
            "pipeline did not drain within {DRAIN_TIMEOUT:?}: MySQL holds {} of {} admitted units",
            e.total - mysql,
            e.admitted
        ));
    }
    let redis_available = compared.verdict().gap.map_or(i64::MIN, |gap| mysql + gap);
    let mut conn = db.conn().await?;
    let rejected: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM stock_deduct_idempotent WHERE sku_id = ? AND status = 'REJECTED'",
            (e.sku.get(),),
        )
        .await?;
    let expected_available = e.total - e.admitted;
    let mut expect_eq = |what: &str, got: i64, want: i64| {
        if got != want {
            bad.push(format!("{what}: {got}, expected {want}"));
        }
    };
    expect_eq("Redis available", redis_available, expected_available);
    expect_eq(
        "MySQL available (== Redis after drain)",
        mysql,
        redis_available,
    );
    expect_eq("ledger live units (== stock taken)", live, e.total - mysql);
    expect_eq("ledger live units (== units admitted)", live, e.admitted);
    expect_eq("REJECTED ledger rows", rejected.unwrap_or(0), 0);
    if mysql < 0 {
        bad.push(format!("MySQL available is negative: {mysql}"));
    }
    Ok(bad)
}

/// Waits (up to [`DRAIN_TIMEOUT`]) until MySQL's available of `sku` is
/// `available`: the consumer applied everything the stock behind it took.
pub async fn wait_applied(db: &Db, sku: SkuId, available: i64) -> bool {
    wait_until(DRAIN_TIMEOUT, DRAIN_POLL, || async {
        matches!(mysql_available(db, sku).await, Ok(a) if a <= available)
    })
    .await
}

async fn mysql_available(db: &Db, sku_id: SkuId) -> anyhow::Result<i64> {
    let mut conn = db.conn().await?;
    let row = sku::get(&mut conn, sku_id).await?;
    Ok(row.map(|r| r.available_stock).unwrap_or(i64::MIN))
}

/// Users holding more than `limit` live units of the SKU (must be none).
pub async fn users_over_limit(db: &Db, sku_id: SkuId, limit: i64) -> anyhow::Result<u64> {
    let mut conn = db.conn().await?;
    let over: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM (SELECT user_id FROM stock_deduct_idempotent
               WHERE sku_id = ? AND status IN ('RESERVED', 'CONFIRMED')
               GROUP BY user_id HAVING SUM(deduct_count) > ?) AS over_limit",
            (sku_id.get(), limit),
        )
        .await?;
    Ok(over.unwrap_or(0) as u64)
}

/// Reconcile poll period with `--target` (each poll checks every SKU).
const RECONCILE_POLL: Duration = Duration::from_millis(250);

/// `--target`: what HTTP shows. Redis' view must match the answers, and the
/// reconciler's report (contract §8: both stores and the ledger, per SKU) must
/// reach `OK` — drained — with every number agreeing.
pub async fn over_http(api: &mut Api, e: Expect) -> Vec<String> {
    let want = e.total - e.admitted;
    let mut bad = Vec::new();
    match api.available(e.sku.get()).await {
        Ok(available) if available == want => {}
        Ok(available) => bad.push(format!(
            "GET /v1/skus/{}: available {available}, expected {want}",
            e.sku
        )),
        Err(err) => bad.push(format!("GET /v1/skus/{}: {err:#}", e.sku)),
    }
    let mut last = serde_json::Value::Null;
    let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
    while tokio::time::Instant::now() < deadline {
        match api.reconcile().await {
            Ok(report) => {
                let entry = report["skus"]
                    .as_array()
                    .and_then(|skus| skus.iter().find(|s| s["sku_id"] == e.sku.get()))
                    .cloned()
                    .unwrap_or_default();
                if entry["verdict"] == "OK" {
                    last = entry;
                    break;
                }
                last = entry;
            }
            Err(err) => last = serde_json::json!({ "error": format!("{err:#}") }),
        }
        tokio::time::sleep(RECONCILE_POLL).await;
    }
    let num = |k: &str| last[k].as_i64();
    let agrees = last["verdict"] == "OK"
        && num("redis_available") == Some(want)
        && num("mysql_available") == Some(want)
        && num("ledger_units") == Some(e.admitted);
    if !agrees {
        bad.push(format!(
            "reconcile report for SKU {} did not reach OK with available {want} and {} ledger units within {DRAIN_TIMEOUT:?}: {last}",
            e.sku, e.admitted
        ));
    }
    bad
}

/// Polls `probe` every `every` until it returns true or `limit` passes.
pub async fn wait_until<F, Fut>(limit: Duration, every: Duration, mut probe: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if probe().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(every).await;
    }
}
