//! The options of `stockd-bench` and their bounds. Its own file so the scenarios
//! (`suite`, `demo`) read them without importing the entry point that runs them.

use std::path::PathBuf;

use anyhow::Context;

/// Most concurrent requesters a phase may use: far above a realistic front
/// tier per node, and the bench must stay a bounded guest on a shared machine.
const CONCURRENCY_MAX: usize = 1_024;
/// Most requests per full-speed phase (a few tens of seconds at worst).
const REQUESTS_MAX: u64 = 200_000;
/// Longest half-load (persist lag) phase.
const LAG_SECS_MAX: u64 = 60;
/// Most expiries of one storm: a few times the 60,000, still bounded.
const STORM_EXPIRIES_MAX: u64 = 200_000;
/// Highest offered rate of the hot-SKU phase: above anything one machine
/// serves, so a typo cannot make the open-loop generator spin.
const HOT_SKU_RATE_MAX: f64 = 100_000.0;

/// File name of the product binary beside `stockd-bench` in a target dir.
const STOCKD_BINARY: &str = "stockd";

/// Options of `stockd-bench`.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "stockd-bench",
    version,
    about = "Load generator of stockd: phases side by side, ratios against the targets, \
             invariants checked after each phase",
    long_about = None,
    after_help = "Reads stockd's configuration (config/, STOCKD_ENV, STOCKD__* variables) \
                  and refuses STOCKD_ENV=production. The stockd under test is the `stockd` \
                  binary beside this one (`cargo build --release --workspace` builds both \
                  into target/release/) unless --stockd names another.",
    args_conflicts_with_subcommands = true
)]
pub struct BenchArgs {
    /// `stockd-bench report`: write BENCHMARKS.md's report instead of running.
    #[command(subcommand)]
    pub action: Option<BenchAction>,
    /// Run the flash-sale demo instead of the benchmark.
    #[arg(long)]
    pub demo: bool,
    /// Drive an already running stockd at this loopback base URL (e.g.
    /// http://127.0.0.1:8080, or https://localhost:8443 with --ca-file)
    /// instead of starting child processes.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// PEM CA that signed the certificate of an `https://` --target (the only
    /// root trusted).
    #[arg(long, value_name = "PEM", requires = "target")]
    pub ca_file: Option<PathBuf>,
    /// Admin token of the `--target` stockd (default: `admin.token` from config).
    #[arg(long, env = "STOCKD_BENCH_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Client token of the `--target` stockd when it requires one
    /// (`auth.required`): a client with scopes reserve, read and lifecycle.
    #[arg(
        long,
        env = "STOCKD_BENCH_TOKEN",
        hide_env_values = true,
        requires = "target",
        conflicts_with = "token_file"
    )]
    pub token: Option<String>,
    /// The same token read from a file (a mounted secret); surrounding
    /// whitespace is ignored.
    #[arg(long, value_name = "PATH", requires = "target")]
    pub token_file: Option<PathBuf>,
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
    /// Run only this phase instead of the whole suite (`--phase` is the same).
    #[arg(long, alias = "phase", value_enum, value_name = "PHASE")]
    pub only: Option<Only>,
    /// Offered rate of the hot-SKU phase in reservations a second, the same for
    /// both variants (default: half the reserve rate this run measured, else 1,000).
    #[arg(long, value_name = "PER_SEC")]
    pub hot_sku_rate: Option<f64>,
    /// Reservations of the expiry storm's burst, which all fall due
    /// `reservation.ttl_secs` (10 s in its child) later.
    #[arg(long, default_value_t = 60_000, value_name = "N")]
    pub storm_expiries: u64,
    /// The `stockd` binary the children run (`migrate`, then `--role all`);
    /// default: `stockd` beside this executable.
    #[arg(long, value_name = "PATH")]
    pub stockd: Option<PathBuf>,
}

/// What `stockd-bench` can do besides running the suite.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum BenchAction {
    /// Rewrite BENCHMARKS.md's report of the current run from bench.json and
    /// the instruction counts (the last step of `make bench`).
    // Boxed: three paths inline would make every parsed command line this large.
    Report(Box<crate::page::ReportArgs>),
}

/// Phases `--only` can run on their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    /// One deep-stock SKU in 1 vs 3 stock buckets (needs a Redis Cluster).
    HotSku,
    /// The two ceiling phases (single-call and batched), no HTTP, no child.
    Ceiling,
    /// `reserve_queue` with events on, bracketed by two children with events off.
    Events,
    /// `reserve_queue`, then 3-line orders, in one durability-queue child: the
    /// CPU of an order next to one reservation (standalone Redis only).
    Orders,
    /// The expiry storm: a burst of reservations with a 10 s time to pay,
    /// then their release (a child of its own).
    ExpiryStorm,
    /// A drop: a crowd waiting for the opening, passes required, the hold
    /// budget on (a child of its own on a private redis-server).
    Drop,
}

impl BenchArgs {
    /// The `stockd` the children run: `--stockd`, else the `stockd` beside this
    /// executable (one target dir builds both). Checked when a child starts,
    /// since `--target` and `--only ceiling` start none.
    pub fn stockd_exe(&self) -> anyhow::Result<PathBuf> {
        if let Some(path) = &self.stockd {
            return Ok(path.clone());
        }
        let me = std::env::current_exe().context("locating the stockd-bench binary")?;
        Ok(me.with_file_name(STOCKD_BINARY))
    }

    /// The client token of `--token` or `--token-file`, if either is given.
    pub fn client_token(&self) -> anyhow::Result<Option<String>> {
        if let Some(path) = &self.token_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--token-file {}", path.display()))?;
            let token = text.trim();
            anyhow::ensure!(
                !token.is_empty(),
                "--token-file {} is empty",
                path.display()
            );
            return Ok(Some(token.to_string()));
        }
        Ok(self.token.clone())
    }

    pub fn validate(&self) -> anyhow::Result<()> {
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
        anyhow::ensure!(
            (1..=STORM_EXPIRIES_MAX).contains(&self.storm_expiries),
            "--storm-expiries must be in 1..={STORM_EXPIRIES_MAX}"
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
