//! The standard scenario of `stockd bench`, in the order that keeps phases from
//! disturbing each other on a 2-core machine: in-process phases run while no
//! stockd child does, each child gets a freshly reset namespace, and every
//! phase is checked before the next one starts.

use std::path::Path;
use std::time::Duration;

use super::check::{Stores, Target};
use super::child::StockdChild;
use super::namespace::Namespace;
use super::phases::persist_lag::Probe;
use super::phases::{self, key, Checked, PhaseResult};
use super::progress::note;
use super::report::Memory;
use super::BenchArgs;
use crate::config::Durability;

/// No full-speed phase runs longer than this, whatever its request budget.
const PHASE_MAX: Duration = Duration::from_secs(30);
/// Requests of each strawman run: at the seed's 1,500–3,900 tx/s, a few seconds.
const STRAWMAN_REQUESTS: u64 = 8_000;
/// Concurrent requesters of the strawman's "old way at peak" run.
pub const STRAWMAN_PEAK_REQUESTERS: usize = 1_000;
/// Backlog drained by the batched consumer: ~1 s at its expected rate.
const CONSUMER_BATCHED_MESSAGES: u64 = 40_000;
/// Backlog drained one transaction per message: ~1–3 s at ~2,000–5,000/s.
const CONSUMER_SINGLE_MESSAGES: u64 = 4_000;
/// SKU ids of the child phases (each child starts from an empty namespace).
const SKU_RESERVE: u64 = 101;
const SKU_SOLD_OUT: u64 = 102;
const SKU_LAG: u64 = 103;
/// Share of the measured reserve throughput the persist-lag run offers.
const HALF_LOAD: f64 = 0.5;

/// Results collected so far, and the first violations (which stop the run).
#[derive(Default)]
pub struct Collected {
    pub phases: Vec<PhaseResult>,
    pub memory: Vec<Memory>,
    pub violations: Vec<String>,
}

impl Collected {
    /// Records a checked phase; `false` (stop) when it violated anything.
    fn gate(&mut self, checked: Checked) -> bool {
        for result in &checked.results {
            note(&format!(
                "{} {:.0} {} {}",
                result.key,
                result.throughput,
                result.unit,
                result
                    .latency
                    .map(|l| format!("p99 {:.2} ms", l.p99))
                    .unwrap_or_default()
            ));
        }
        self.phases.extend(checked.results);
        self.violations.extend(checked.violations);
        self.violations.is_empty()
    }

    fn throughput(&self, key: &str) -> Option<f64> {
        self.phases
            .iter()
            .find(|p| p.key == key)
            .map(|p| p.throughput)
    }
}

fn plan(requests: u64) -> super::load::Plan {
    super::load::Plan {
        requests,
        max_duration: PHASE_MAX,
        rate_per_sec: None,
    }
}

/// Runs every phase; stops after the first phase with a violation.
pub async fn run_phases(
    args: &BenchArgs,
    ns: &Namespace,
    out: &mut Collected,
) -> anyhow::Result<()> {
    let conc = args.concurrency;
    note("phase ceiling: reserve Lua through RedisStore, no HTTP");
    if !out.gate(phases::ceiling::run(ns, plan(args.requests), conc).await?) {
        return Ok(());
    }
    ns.cleanup().await?;
    let proceed = match &args.target {
        None => children(args, ns, out).await?,
        Some(url) => target(args, ns, url, out).await?,
    };
    if !proceed {
        return Ok(());
    }
    ns.cleanup().await?;
    crate::db::migrate::migrate(&ns.settings.mysql.url).await?;
    for (k, requesters) in [
        (key::STRAWMAN, conc),
        (key::STRAWMAN_1000, STRAWMAN_PEAK_REQUESTERS),
    ] {
        note(&format!(
            "phase {k}: SELECT ... FOR UPDATE + UPDATE, {requesters} requesters"
        ));
        if !out.gate(phases::strawman::run(ns, k, plan(STRAWMAN_REQUESTS), requesters).await?) {
            return Ok(());
        }
    }
    note("phase consumer: drain a preloaded backlog, batched vs one transaction per message");
    let checked =
        phases::consumer::run(ns, CONSUMER_BATCHED_MESSAGES, CONSUMER_SINGLE_MESSAGES).await?;
    out.gate(checked);
    Ok(())
}

/// The HTTP phases against child stockd processes: one per durability.
async fn children(args: &BenchArgs, ns: &Namespace, out: &mut Collected) -> anyhow::Result<bool> {
    let conc = args.concurrency;
    let out_dir = Path::new(&args.out_dir);
    for (durability, k, label) in [
        (Durability::Redis, key::RESERVE_REDIS, "child-redis"),
        (Durability::Queue, key::RESERVE_QUEUE, "child-queue"),
    ] {
        note(&format!(
            "starting stockd --role all ({label}); logs in {}/{label}.log",
            out_dir.display()
        ));
        let child = StockdChild::start(ns, durability, label, out_dir).await?;
        let stores = Stores {
            db: ns.db()?,
            redis: ns.redis()?,
        };
        let target = Target {
            addr: child.addr,
            admin_token: &ns.admin_token,
            stores: Some(&stores),
        };
        let title = format!("POST reservations, durability {label}");
        note(&format!("phase {k}"));
        let mut ok = out.gate(
            phases::reserve::reserve(&target, k, title, SKU_RESERVE, plan(args.requests), conc)
                .await?,
        );
        if ok && durability == Durability::Queue {
            ok = queue_only(args, &target, &stores, out).await?;
        }
        out.memory.push(Memory {
            process: format!("stockd --role all ({label})"),
            pid: child.pid(),
            peak_rss_mib: child.peak_rss_mib()?,
        });
        child.stop().await?;
        stores.db.disconnect().await;
        if !ok {
            return Ok(false);
        }
        ns.cleanup().await?;
    }
    Ok(true)
}

/// Sold-out and persist lag, on the default-durability child.
async fn queue_only(
    args: &BenchArgs,
    target: &Target<'_>,
    stores: &Stores,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    note("phase sold_out");
    let conc = args.concurrency;
    if !out.gate(
        phases::reserve::sold_out(
            target,
            key::SOLD_OUT,
            SKU_SOLD_OUT,
            plan(args.requests),
            conc,
        )
        .await?,
    ) {
        return Ok(false);
    }
    let rate = out.throughput(key::RESERVE_QUEUE).unwrap_or(0.0) * HALF_LOAD;
    anyhow::ensure!(rate >= 1.0, "reserve_queue measured no throughput");
    note(&format!(
        "phase persist_lag: {rate:.0} req/s for {} s",
        args.lag_secs
    ));
    let lag = Duration::from_secs(args.lag_secs);
    let probe = Probe::Mysql(&stores.db);
    Ok(out.gate(phases::persist_lag::run(target, probe, SKU_LAG, rate, lag, conc).await?))
}

/// `--target`: the HTTP phases against a running stockd, checked over HTTP.
async fn target(
    args: &BenchArgs,
    ns: &Namespace,
    url: &str,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    let addr = super::http_client::loopback_addr(url).await?;
    let token = args
        .admin_token
        .clone()
        .or_else(|| ns.base_admin_token.clone())
        .ok_or_else(|| {
            anyhow::anyhow!("--target needs --admin-token (or admin.token in config)")
        })?;
    let target = Target {
        addr,
        admin_token: &token,
        stores: None,
    };
    // Fresh SKU ids per run: the target's database keeps what the bench creates.
    let base = 9_000_000_000_000 + (crate::telemetry::unix_ms() / 1000 % 1_000_000) * 10;
    let conc = args.concurrency;
    note(&format!(
        "phase {} against {url} (SKUs from {base})",
        key::RESERVE_TARGET
    ));
    let title = format!("POST reservations on {url}");
    if !out.gate(
        phases::reserve::reserve(
            &target,
            key::RESERVE_TARGET,
            title,
            base + 1,
            plan(args.requests),
            conc,
        )
        .await?,
    ) {
        return Ok(false);
    }
    if !out.gate(
        phases::reserve::sold_out(&target, key::SOLD_OUT, base + 2, plan(args.requests), conc)
            .await?,
    ) {
        return Ok(false);
    }
    let rate = out.throughput(key::RESERVE_TARGET).unwrap_or(0.0) * HALF_LOAD;
    anyhow::ensure!(rate >= 1.0, "reserve_target measured no throughput");
    let probe = Probe::Http(super::api::Api::new(addr, &token));
    let lag = Duration::from_secs(args.lag_secs);
    Ok(out.gate(phases::persist_lag::run(&target, probe, base + 3, rate, lag, conc).await?))
}
