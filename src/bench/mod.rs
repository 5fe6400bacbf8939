//! `stockd bench`: the load generator. It answers the question buyers of a
//! flash-sale system ask — how many reservations a second on one hot SKU, and
//! how much better than the old way — with phases measured side by side in one
//! run on one machine, reported as ratios against the targets of the
//! benchmark issue, and checked for correctness after every phase.
//!
//! - [`suite`]: the standard scenario (`make bench`); [`demo`]: `make demo`.
//! - [`phases`]: ceiling, reserve, sold-out, persist lag, hot SKU (stock
//!   buckets on a Redis Cluster), strawman, consumer.
//! - [`load`], [`http_client`], [`api`]: the driver and its HTTP/1.1 client.
//! - [`child`], [`namespace`]: the stockd under test and its isolated data.
//! - [`cpu`], [`slowlog`]: where the time went (CPU per process, Redis stalls).
//! - [`round_trips`]: the extra Redis calls stock buckets cost, from `/metrics`.
//! - [`check`]: the invariants; [`report`], [`ratios`], [`hot_sku`], [`svg`],
//!   [`machine`]: output.

pub mod api;
pub mod batches;
pub mod check;
pub mod child;
pub mod cpu;
pub mod demo;
pub mod efficiency;
pub mod hot_sku;
pub mod http_client;
pub mod load;
pub mod machine;
pub mod namespace;
pub mod phases;
pub mod progress;
pub mod ratios;
pub mod redis_servers;
pub mod report;
pub mod round_trips;
pub mod slowlog;
pub mod stats;
pub mod suite;
pub mod svg;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;

use crate::config::Settings;
use machine::Machine;
use namespace::Namespace;
use progress::note;
use report::Report;

/// Most concurrent requesters a phase may use: far above a realistic front
/// tier per node, and the bench must stay a bounded guest on a shared machine.
const CONCURRENCY_MAX: usize = 1_024;
/// Most requests per full-speed phase (a few tens of seconds at worst).
const REQUESTS_MAX: u64 = 200_000;
/// Longest half-load (persist lag) phase.
const LAG_SECS_MAX: u64 = 60;
/// Highest offered rate of the hot-SKU phase: above anything one machine
/// serves, so a typo cannot make the open-loop generator spin.
const HOT_SKU_RATE_MAX: f64 = 100_000.0;

/// Options of `stockd bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Run the flash-sale demo instead of the benchmark.
    #[arg(long)]
    pub demo: bool,
    /// Drive an already running stockd at this loopback base URL (e.g.
    /// http://127.0.0.1:8080) instead of starting child processes.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Admin token of the `--target` stockd (default: `admin.token` from config).
    #[arg(long, env = "STOCKD_BENCH_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Pid of the `--target` stockd, for its CPU time and peak RSS.
    #[arg(long, value_name = "PID", requires = "target")]
    pub target_pid: Option<u32>,
    /// Concurrent requesters of every phase (the strawman also runs at 1,000).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Requests of each full-speed phase (ceiling, reserve, sold-out).
    #[arg(long, default_value_t = 30_000)]
    pub requests: u64,
    /// Seconds of the half-load run that measures persist lag.
    #[arg(long, default_value_t = 5)]
    pub lag_secs: u64,
    /// First SKU id of the HTTP phases. With `--target` the default is fresh
    /// per run (9e12 + seconds), because the target keeps what the bench creates.
    #[arg(long, value_name = "ID")]
    pub sku_base_id: Option<u64>,
    /// Where bench.json, bench.md, bench.svg and the child logs go.
    #[arg(long, default_value = "bench-out")]
    pub out_dir: PathBuf,
    /// Keep the bench database, Redis keys and queues afterwards (debugging).
    #[arg(long)]
    pub keep: bool,
    /// Run only this phase instead of the whole suite.
    #[arg(long, value_enum, value_name = "PHASE")]
    pub only: Option<Only>,
    /// Offered rate of the hot-SKU phase in reservations a second, the same for
    /// both variants (default: half the reserve rate this run measured, else 1,000).
    #[arg(long, value_name = "PER_SEC")]
    pub hot_sku_rate: Option<f64>,
}

/// Phases `--only` can run on their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    /// One deep-stock SKU in 1 vs 3 stock buckets (needs a Redis Cluster).
    HotSku,
}

impl BenchArgs {
    fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=CONCURRENCY_MAX).contains(&self.concurrency),
            "--concurrency must be in 1..={CONCURRENCY_MAX}"
        );
        anyhow::ensure!(
            (1..=REQUESTS_MAX).contains(&self.requests),
            "--requests must be in 1..={REQUESTS_MAX}"
        );
        anyhow::ensure!(
            (1..=LAG_SECS_MAX).contains(&self.lag_secs),
            "--lag-secs must be in 1..={LAG_SECS_MAX}"
        );
        if let Some(rate) = self.hot_sku_rate {
            anyhow::ensure!(
                (1.0..=HOT_SKU_RATE_MAX).contains(&rate),
                "--hot-sku-rate must be in 1..={HOT_SKU_RATE_MAX}"
            );
        }
        Ok(())
    }
}

pub async fn run(args: BenchArgs, settings: Settings) -> anyhow::Result<ExitCode> {
    args.validate()?;
    if args.demo {
        return demo::run(args, settings).await;
    }
    let started = Instant::now();
    if let Some(pid) = args.target_pid {
        cpu::watch_target(pid);
    }
    let ns = Namespace::new(&settings, "bench")?;
    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("creating {}", args.out_dir.display()))?;
    let machine = Machine::detect(&ns).await;
    note(&machine.summary());
    ns.cleanup()
        .await
        .context("removing leftovers of an earlier run")?;
    let mut collected = suite::Collected::new(&ns)?;
    let outcome = suite::run_phases(&args, &ns, &mut collected).await;
    if !args.keep {
        if let Err(err) = ns.cleanup().await {
            note(&format!("cleanup failed: {err:#}"));
        }
    }
    outcome?;
    let violations = std::mem::take(&mut collected.violations);
    let report = Report {
        generated_at: now_rfc3339(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        concurrency: args.concurrency,
        machine,
        ratios: ratios::compute(&collected.phases, &collected.memory),
        phases: collected.phases,
        memory: collected.memory,
        correctness: if violations.is_empty() {
            "all invariants held after every phase".into()
        } else {
            format!("FAILED: {}", violations.join("; "))
        },
    };
    print!("{}", report.text());
    report.write(&args.out_dir)?;
    note(&format!(
        "wrote {dir}/bench.json, {dir}/bench.md, {dir}/bench.svg in {:.0} s",
        started.elapsed().as_secs_f64(),
        dir = args.out_dir.display()
    ));
    if violations.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "\n!!!!!!!! stockd bench: CORRECTNESS VIOLATED — the numbers above do not count !!!!!!!!"
    );
    for v in &violations {
        eprintln!("  ✗ {v}");
    }
    Ok(ExitCode::FAILURE)
}

fn now_rfc3339() -> String {
    crate::clock::rfc3339_ms(crate::clock::unix_ms())
}
