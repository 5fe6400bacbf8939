//! The expiry storm: everything reserved in a sale's peak second falls due in
//! one second `reservation.ttl_secs` later, and a unit that expired but is not
//! released yet is one buyers are told is sold out. The phase starts a child
//! (durability queue) whose time to pay is [`TTL_SECS`], reserves `expiries`
//! units at full speed from `concurrency` connections (one buyer each), does
//! nothing while they fall due, and waits until both stores hold the full
//! stock again.
//!
//! Measured:
//! - the burst's reservations per second (the driver, as every reserve phase);
//! - the release from the ledger: every released row's `expires_at_ms` (due)
//!   and `finished_at_ms` (the closer's time when it decided the release), in
//!   ms of the machine's one clock — exact without a poller, read in one query
//!   at the end ([`crate::results::ExpiryStorm`]);
//! - when Redis' available came back to the full stock (the moment a buyer
//!   can have every unit again), by a read every [`POLL_STOCK`];
//! - which path released them, from the child's `/metrics` before and after.
//!
//! [`TTL_SECS`] is longer than the burst at this machine's rate (60,000 at
//! ~6,000/s), so releases do not compete with admissions, as in a sale whose
//! holds last 15 minutes; a slower machine overlaps them (the phase says so).
//! The phase fails unless every admitted unit came back in both stores and
//! the ledger holds no `RESERVED` row of the SKU.

use std::path::Path;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::reserve::workers;
use super::Checked;
use crate::drive::load::{drive, Plan};
use crate::drive::progress::note;
use crate::results::{key, Burst, Memory, PhaseResult, Released};
use crate::stack::check::{self, Expect, Stores, Target};
use crate::stack::child::StockdChild;
use crate::stack::namespace::Namespace;
use crate::stack::releases::ReleaseCounters;
use stockd::config::Durability;
use stockd::domain::SkuId;

/// The storm child's `reservation.ttl_secs`: longer than a 60,000 burst takes
/// here, short enough that the phase stays well under two minutes (defined
/// beside the namespace's cleanup, which removes its delay queue).
pub const TTL_SECS: u64 = crate::stack::namespace::STORM_TTL_SECS;
/// Period of the Redis read that finds the full stock back: the resolution of
/// `stock_back_after_last_due_ms`.
pub const POLL_STOCK: Duration = Duration::from_millis(10);
/// Past the worst-case bound (`ttl + grace + sweep interval`), how long the
/// phase waits before it calls the release failed.
const RELEASE_MARGIN: Duration = Duration::from_secs(60);
/// Longest burst: a slow machine still ends the phase in bounded time.
const BURST_MAX: Duration = Duration::from_secs(30);
/// Label (and log file name) of the storm's child.
pub const CHILD_LABEL: &str = "child-queue-storm";

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub sku: u64,
    pub expiries: u64,
    pub concurrency: usize,
}

/// Starts the storm's child, runs the storm, stops the child.
pub async fn run(
    ns: &Namespace,
    out_dir: &Path,
    setup: Setup,
) -> anyhow::Result<(Checked, Memory)> {
    let ttl = TTL_SECS.to_string();
    let env = [("STOCKD__RESERVATION__TTL_SECS", ttl.as_str())];
    let child = StockdChild::start_with(ns, Durability::Queue, CHILD_LABEL, out_dir, &env).await?;
    let stores = ns.stores()?;
    let target = Target::child(child.addr, &ns.admin_token, &stores);
    let closer = &ns.settings.closer;
    let bound = Duration::from_secs(TTL_SECS)
        + Duration::from_millis(closer.grace_ms + closer.sweep_interval_ms);
    let checked = storm(&target, &stores, setup, bound + RELEASE_MARGIN).await;
    let memory = Memory {
        process: format!("stockd --role all ({CHILD_LABEL})"),
        pid: child.pid(),
        peak_rss_mib: child.peak_rss_mib()?,
    };
    child.stop().await?;
    stores.db.disconnect().await;
    Ok((checked?, memory))
}

async fn storm(
    target: &Target<'_>,
    stores: &Stores,
    setup: Setup,
    wait_max: Duration,
) -> anyhow::Result<Checked> {
    let sku = SkuId::new(setup.sku)?;
    let total = i64::try_from(setup.expiries)?;
    target.api().put_sku(setup.sku, total, 1).await?;
    let before = ReleaseCounters::read(target.addr).await;
    let plan = Plan {
        requests: setup.expiries,
        max_duration: BURST_MAX,
        rate_per_sec: None,
    };
    let reservers = workers(target, setup.sku, "e", setup.concurrency);
    let run = drive(key::EXPIRY_STORM_BURST, plan, reservers).await;
    let admitted = run.tally.done as i64;
    let mut violations = check::answers(
        Expect {
            sku,
            total,
            admitted,
        },
        &run.tally,
    );
    if run.elapsed > Duration::from_secs(TTL_SECS) {
        note(&format!(
            "expiry_storm: the burst took {:.1} s, longer than the {TTL_SECS} s to pay: \
             releases overlapped the burst",
            run.elapsed.as_secs_f64()
        ));
    }
    note(&format!(
        "expiry_storm: {admitted} reserved; waiting for their release (at most {wait_max:?})"
    ));
    let stock_back_at = stock_back(stores, sku, total, wait_max).await;
    if stock_back_at.is_none() {
        violations.push(format!(
            "expiry_storm: Redis available did not return to {total} within {wait_max:?}"
        ));
    }
    violations.extend(both_stores_full(stores, sku, total).await);
    let after = ReleaseCounters::read(target.addr).await;
    let paths = before
        .zip(after)
        .map(|(b, a)| a.since(&b))
        .unwrap_or_default();
    let rows = released_rows(stores, sku).await?;
    let burst = Burst {
        ttl_secs: TTL_SECS,
        reserved: admitted as u64,
        reservations_per_sec: run.throughput(),
    };
    if (rows.len() as i64) != admitted {
        violations.push(format!(
            "expiry_storm: {} rows released as EXPIRED, {admitted} admitted",
            rows.len()
        ));
    }
    let measured = crate::measure::storm_lags::of_rows(burst, &rows, stock_back_at, paths);
    let burst_result = PhaseResult::from_run(
        key::EXPIRY_STORM_BURST,
        format!("POST reservations at full speed with reservation.ttl_secs {TTL_SECS} (the storm's burst)"),
        "req/s",
        setup.concurrency,
        &run,
    );
    let mut release = PhaseResult::from_rate(
        key::EXPIRY_STORM,
        "the storm's release: expired reservations released (lag: due time → release, ledger)"
            .into(),
        "releases/s",
        rows.len() as u64,
        Duration::ZERO,
    );
    if let Some(m) = &measured {
        // The time from the first release to the last, which the rate divides by.
        release.throughput = m.releases_per_sec;
        release.elapsed_ms = m.released as f64 * 1000.0 / m.releases_per_sec;
        release.latency = m.lag_ms;
    }
    // Slowlog stalls of the whole storm, burst included, count against it.
    release.started_unix_ms = burst_result.started_unix_ms;
    release.expiry_storm = measured;
    Ok(Checked {
        results: vec![burst_result, release],
        violations,
    })
}

/// Reads Redis' available every [`POLL_STOCK`] until it is `total`; the
/// Unix ms of the first read that found it, or `None` after `limit`.
async fn stock_back(stores: &Stores, sku: SkuId, total: i64, limit: Duration) -> Option<u64> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let available = stores.redis.skus().sku(sku).await;
        let now = stockd::clock::unix_ms();
        if matches!(available, Ok(Some(s)) if s.available == total) {
            return Some(now);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL_STOCK).await;
    }
}

/// The end state the phase requires: both stores at the full stock, no
/// `RESERVED` row left (the ledger's live units are 0).
async fn both_stores_full(stores: &Stores, sku: SkuId, total: i64) -> Vec<String> {
    let expect = Expect {
        sku,
        total,
        admitted: 0,
    };
    check::stores_after_drain(&stores.db, &stores.redis, expect)
        .await
        .into_iter()
        .map(|v| format!("expiry_storm, after the release: {v}"))
        .collect()
}

/// Every row of the SKU released as expired: its due and release times.
async fn released_rows(stores: &Stores, sku: SkuId) -> anyhow::Result<Vec<Released>> {
    let mut conn = stores.db.conn().await?;
    let rows: Vec<(u64, Option<u64>)> = conn
        .exec(
            "SELECT expires_at_ms, finished_at_ms FROM stock_deduct_idempotent
             WHERE sku_id = ? AND status = 'RELEASED' AND reason = 'EXPIRED'",
            (sku.get(),),
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(|(expires_at_ms, finished)| {
            finished.map(|finished_at_ms| Released {
                expires_at_ms,
                finished_at_ms,
            })
        })
        .collect())
}
