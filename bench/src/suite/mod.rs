//! The standard scenario of `stockd-bench`, in the order that keeps phases from
//! disturbing each other on a 2-core machine: in-process phases run while no
//! stockd child does, each child gets a freshly reset namespace, and every
//! phase is checked before the next one starts.

mod drop_run;
mod on_cluster;
mod orders_run;
mod storm_run;
mod variants;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use crate::args::{BenchArgs, Only};
use crate::drive::progress::note;
use crate::measure::slowlog::stalls;
use crate::phases::persist_lag::Probe;
use crate::phases::{self, Checked};
use crate::results::Memory;
use crate::results::{key, PhaseResult};
use crate::stack::check::Target;
use crate::stack::child::StockdChild;
use crate::stack::namespace::Namespace;
use stockd::config::Durability;

/// No full-speed phase runs longer than this, whatever its request budget.
const PHASE_MAX: Duration = Duration::from_secs(30);
/// Requests of each strawman run: at the seed's 1,500–3,900 tx/s, a few seconds.
const STRAWMAN_REQUESTS: u64 = 8_000;
/// Concurrent requesters of the strawman's "old way at peak" run.
pub const STRAWMAN_PEAK_REQUESTERS: usize = 1_000;
/// Deductions drained by the batched consumer: a second or two at its rate.
const CONSUMER_BATCHED_DEDUCTIONS: u64 = 100_000;
/// Deductions drained one per message and transaction: a few seconds at its rate.
const CONSUMER_SINGLE_DEDUCTIONS: u64 = 4_000;
/// Default `--sku-base-id` with a child stockd.
const CHILD_SKU_BASE: u64 = 100;
/// Default `--sku-base-id` with `--target`, plus seconds: far above real SKU ids.
const TARGET_SKU_BASE: u64 = 9_000_000_000_000;
/// SKU ids of the HTTP phases, added to the base.
const SKU_RESERVE: u64 = 1;
const SKU_SOLD_OUT: u64 = 2;
const SKU_LAG: u64 = 3;
/// The hot-SKU phase's two SKUs (one bucket, three buckets).
const SKU_HOT: [u64; 2] = [4, 5];
/// The fan-in phase's SKU (after the hot-SKU phase's two).
const SKU_FAN_IN: u64 = 6;
/// The orders phase's three SKUs (after the fan-in phase's).
const SKU_ORDERS: [u64; 3] = [7, 8, 9];
/// The interleaved orders phase's SKUs: one for reservations, three for orders.
const SKU_INTERLEAVED: u64 = 10;
const SKU_INTERLEAVED_ORDERS: [u64; 3] = [11, 12, 13];
/// The expiry storm's SKU.
const SKU_STORM: u64 = 14;
/// The drop's SKU.
const SKU_DROP: u64 = 15;
/// Connections of the fan-in phase: a busy sale's many buyers at once.
pub const FAN_IN_CONNECTIONS: usize = 1_000;
/// Share of the measured reserve throughput the persist-lag run offers.
const HALF_LOAD: f64 = 0.5;

/// Results collected so far, and the first violations (which stop the run).
pub struct Collected {
    pub phases: Vec<PhaseResult>,
    pub memory: Vec<Memory>,
    pub violations: Vec<String>,
    /// Reads Redis' SLOWLOG after each phase.
    redis: stockd::redis::RedisStore,
    prefix: String,
}

impl Collected {
    pub fn new(ns: &Namespace) -> anyhow::Result<Self> {
        Ok(Self {
            phases: Vec::new(),
            memory: Vec::new(),
            violations: Vec::new(),
            redis: ns.redis()?,
            prefix: ns.settings.redis.key_prefix.clone(),
        })
    }

    /// Records a checked phase; `false` (stop) when it violated anything.
    async fn gate(&mut self, mut checked: Checked) -> bool {
        let to_s = stockd::clock::unix_ms() / 1000;
        for result in &mut checked.results {
            let from_s = result.started_unix_ms / 1000;
            result.redis_stalls = stalls(&self.redis, &self.prefix, from_s, to_s).await;
        }
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

fn plan(requests: u64) -> crate::drive::load::Plan {
    crate::drive::load::Plan {
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
    if args.only == Some(Only::HotSku) {
        on_cluster::run(args, ns, out).await?;
        return Ok(());
    }
    if args.only == Some(Only::Events) {
        variants::events(args, ns, out).await?;
        return Ok(());
    }
    if args.only == Some(Only::Orders) {
        return orders_run::only(args, ns, out).await;
    }
    if args.only == Some(Only::ExpiryStorm) {
        storm_run::run(args, ns, out).await?;
        return Ok(());
    }
    if args.only == Some(Only::Drop) {
        drop_run::run(args, ns, out).await?;
        return Ok(());
    }
    let conc = args.concurrency;
    for (batched, what) in [(false, "one call each"), (true, "batch admission")] {
        note(&format!(
            "phase ceiling: reserve Lua through RedisStore, {what}, no HTTP"
        ));
        let checked = phases::ceiling::run(ns, plan(args.requests), conc, batched).await?;
        if !out.gate(checked).await {
            return Ok(());
        }
    }
    if args.only == Some(Only::Ceiling) {
        return Ok(());
    }
    ns.cleanup().await?;
    let proceed = match &args.target {
        None => children(args, ns, out).await?,
        Some(url) => target(args, ns, url, out).await?,
    };
    if !proceed
        || !storm_run::run(args, ns, out).await?
        || !drop_run::run(args, ns, out).await?
        || !on_cluster::run(args, ns, out).await?
    {
        return Ok(());
    }
    ns.cleanup().await?;
    stockd::db::migrate::migrate(&ns.settings.mysql.url).await?;
    for (k, requesters) in [
        (key::STRAWMAN, conc),
        (key::STRAWMAN_1000, STRAWMAN_PEAK_REQUESTERS),
    ] {
        note(&format!(
            "phase {k}: SELECT ... FOR UPDATE + UPDATE, {requesters} requesters"
        ));
        let checked = phases::strawman::run(ns, k, plan(STRAWMAN_REQUESTS), requesters).await?;
        if !out.gate(checked).await {
            return Ok(());
        }
    }
    note("phase consumer: drain a preloaded backlog, batched vs one transaction per message");
    let checked =
        phases::consumer::run(ns, CONSUMER_BATCHED_DEDUCTIONS, CONSUMER_SINGLE_DEDUCTIONS).await?;
    out.gate(checked).await;
    Ok(())
}

/// First SKU id of the HTTP phases: `--sku-base-id`, else 100 for a child (its
/// namespace starts empty) and a fresh base per run for `--target`.
fn sku_base(args: &BenchArgs) -> u64 {
    let fresh = || TARGET_SKU_BASE + (stockd::clock::unix_ms() / 1000 % 1_000_000) * 10;
    match (args.sku_base_id, &args.target) {
        (Some(base), _) => base,
        (None, None) => CHILD_SKU_BASE,
        (None, Some(_)) => fresh(),
    }
}

/// Keys of one child's phases: (reserve, half load, persist lag).
type ChildKeys = (&'static str, &'static str, &'static str);

/// The HTTP phases against child stockd processes: one per durability. Each
/// child is measured at full speed, then at half of its own full speed for the
/// persist lag; the default-durability child also runs the sold-out phase.
async fn children(args: &BenchArgs, ns: &Namespace, out: &mut Collected) -> anyhow::Result<bool> {
    let out_dir = Path::new(&args.out_dir);
    let runs: [(Durability, &str, ChildKeys); 2] = [
        (
            Durability::Redis,
            "child-redis",
            (
                key::RESERVE_REDIS,
                key::HALF_LOAD_REDIS,
                key::PERSIST_LAG_REDIS,
            ),
        ),
        (
            Durability::Queue,
            "child-queue",
            (key::RESERVE_QUEUE, key::HALF_LOAD, key::PERSIST_LAG),
        ),
    ];
    for (durability, label, keys) in runs {
        note(&format!(
            "starting stockd --role all ({label}); logs in {}/{label}.log",
            out_dir.display()
        ));
        let child = StockdChild::start(ns, durability, label, out_dir).await?;
        let stores = ns.stores()?;
        let target = Target::child(child.addr, &ns.admin_token, &stores);
        let probe = Probe::Mysql(&stores.db);
        let sold_out = durability == Durability::Queue;
        let ok = http_phases(args, &target, probe, keys, sold_out, out).await?;
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
        if durability == Durability::Redis && !variants::run(args, ns, out).await? {
            return Ok(false);
        }
        if durability == Durability::Queue && !variants::traced(args, ns, out).await? {
            return Ok(false);
        }
        if durability == Durability::Queue && !variants::events(args, ns, out).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Reserve at full speed, orders and sold-out (if asked), then half load with
/// persist lag.
async fn http_phases(
    args: &BenchArgs,
    target: &Target<'_>,
    probe: Probe<'_>,
    (reserve_key, half_key, lag_key): ChildKeys,
    with_sold_out: bool,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    let conc = args.concurrency;
    let base = sku_base(args);
    note(&format!("phase {reserve_key}"));
    let title = match reserve_key {
        key::RESERVE_REDIS => "POST reservations, durability: redis".to_string(),
        key::RESERVE_QUEUE => "POST reservations, durability: queue".to_string(),
        _ => "POST reservations on the --target stockd".to_string(),
    };
    let sku = base + SKU_RESERVE;
    let checked =
        phases::reserve::reserve(target, reserve_key, title, sku, plan(args.requests), conc);
    if !out.gate(checked.await?).await {
        return Ok(false);
    }
    if with_sold_out && !orders_run::after_reserve(args, target, out).await? {
        return Ok(false);
    }
    if with_sold_out {
        note("phase sold_out");
        let checked = phases::reserve::sold_out(
            target,
            key::SOLD_OUT,
            base + SKU_SOLD_OUT,
            plan(args.requests),
            conc,
        );
        if !out.gate(checked.await?).await {
            return Ok(false);
        }
        note(&format!(
            "phase {}: {FAN_IN_CONNECTIONS} connections",
            key::RESERVE_FAN_IN
        ));
        let title = format!("POST reservations from {FAN_IN_CONNECTIONS} connections");
        let checked = phases::reserve::reserve(
            target,
            key::RESERVE_FAN_IN,
            title,
            base + SKU_FAN_IN,
            plan(args.requests),
            FAN_IN_CONNECTIONS,
        );
        if !out.gate(checked.await?).await {
            return Ok(false);
        }
    }
    let rate = out.throughput(reserve_key).unwrap_or(0.0) * HALF_LOAD;
    anyhow::ensure!(rate >= 1.0, "{reserve_key} measured no throughput");
    note(&format!(
        "phase {lag_key}: {rate:.0} req/s for {} s",
        args.lag_secs
    ));
    let lag = Duration::from_secs(args.lag_secs);
    let keys = (half_key, lag_key);
    let checked = phases::persist_lag::run(target, probe, keys, base + SKU_LAG, rate, lag, conc);
    Ok(out.gate(checked.await?).await)
}

/// `--target`: the HTTP phases against a running stockd, checked over HTTP.
async fn target(
    args: &BenchArgs,
    ns: &Namespace,
    url: &str,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    let (addr, token, client_token) = target_access(args, ns, url).await?;
    let client_token = client_token.as_deref();
    let target = Target {
        addr,
        admin_token: &token,
        client_token,
        stores: None,
    };
    note(&format!(
        "driving {url}: SKU ids from {}",
        sku_base(args) + 1
    ));
    let keys = (key::RESERVE_TARGET, key::HALF_LOAD, key::PERSIST_LAG);
    let ok = http_phases(
        args,
        &target,
        Probe::http(addr, &token, client_token),
        keys,
        true,
        out,
    )
    .await?;
    if let Some(pid) = args.target_pid {
        out.memory.push(Memory {
            process: format!("stockd --target {url}"),
            pid,
            peak_rss_mib: crate::stack::child::peak_rss_mib(pid)?,
        });
    }
    Ok(ok)
}

/// An `https://` target's TLS, trusting `--ca-file` (which plain `http://` refuses).
fn register_tls(
    url: &str,
    addr: SocketAddr,
    ca_file: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let https = url.starts_with("https://");
    match (https, ca_file) {
        (false, None) => Ok(()),
        (false, Some(_)) => anyhow::bail!("--ca-file is for an https:// --target, got {url}"),
        (true, None) => anyhow::bail!("an https:// --target needs --ca-file <pem>"),
        (true, Some(ca)) => {
            let host_port = crate::drive::http_client::host_port(url)?;
            let host = host_port
                .rsplit_once(':')
                .map_or(host_port, |(host, _)| host);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            crate::drive::tls_target::register(addr, host, ca)
        }
    }
}

/// `--target`'s loopback address, admin token and client token (`--token`,
/// `--token-file`; none for a target with `auth.required` false).
async fn target_access(
    args: &BenchArgs,
    ns: &Namespace,
    url: &str,
) -> anyhow::Result<(SocketAddr, String, Option<String>)> {
    let addr = crate::drive::http_client::loopback_addr(url).await?;
    register_tls(url, addr, args.ca_file.as_deref())?;
    let token = args
        .admin_token
        .clone()
        .or_else(|| ns.base_admin_token.clone())
        .ok_or_else(|| {
            anyhow::anyhow!("--target needs --admin-token (or admin.token in config)")
        })?;
    Ok((addr, token, args.client_token()?))
}
