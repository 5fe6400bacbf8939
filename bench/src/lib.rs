//! `stockd-bench`: the load generator. It answers the question buyers of a
//! flash-sale system ask — how many reservations a second on one hot SKU, and
//! how much better than the old way — with phases measured side by side in one
//! run on one machine, reported as ratios against the targets of the
//! benchmark issue, and checked for correctness after every phase.
//!
//! A crate of its own beside the product (docs/architecture.md, "The load
//! generator"): it links the `stockd` library for the stores, the domain and
//! the configuration, and starts the `stockd` binary as the stack under test.
//!
//! Grouped by what it does; imports point down this list only:
//!
//! - [`suite`]: the standard scenario (`make bench`); [`demo`]: `make demo`;
//!   [`args`]: the options both read.
//! - [`phases`]: ceiling, reserve, sold-out, persist lag, hot SKU (stock
//!   buckets on a Redis Cluster), orders (3-line, standalone Redis), strawman,
//!   consumer, expiry storm, drop.
//! - [`stack`]: the stack under test — stockd children, the run's isolated
//!   data, the machine, the child's `/metrics`, the invariants.
//! - [`drive`]: the load driver, its HTTP/1.1 client, the API request makers.
//! - [`measure`]: where the time went (percentiles, CPU per process, Redis stalls).
//! - [`report`]: the tables, the target rows, the chart (reads [`results`] only).
//! - [`results`]: the data types every layer above shares.
//! - [`page`]: `stockd-bench report`, BENCHMARKS.md's generated block (reads
//!   the run's bench.json, not [`results`]).

pub mod args;
pub mod demo;
pub mod drive;
pub mod measure;
pub mod page;
pub mod phases;
pub mod report;
pub mod results;
pub mod stack;
pub mod suite;

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;

use args::BenchArgs;
use drive::progress::note;
use results::{Machine, Report};
use stack::namespace::Namespace;
use stockd::config::Settings;

/// Refuses `STOCKD_ENV=production` before anything is read or created: the
/// bench creates SKUs, Redis keys and queues and drives load at full speed,
/// none of which belongs near real stock.
pub fn refuse_production(env: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        env != "production",
        "stockd-bench refuses to run with STOCKD_ENV=production: it creates SKUs and \
         drives load (run it against a local or test stack)"
    );
    Ok(())
}

/// `stockd-bench`: the demo, or the suite followed by its report (stdout and
/// `--out-dir`); exits 1 when an invariant was violated.
pub async fn run(args: BenchArgs, settings: Settings) -> anyhow::Result<ExitCode> {
    if let Some(args::BenchAction::Report(report)) = &args.action {
        page::run(report)?;
        return Ok(ExitCode::SUCCESS);
    }
    args.validate()?;
    if args.demo {
        return demo::run(args, settings).await;
    }
    let started = Instant::now();
    if let Some(pid) = args.target_pid {
        measure::cpu::watch_target(pid);
    }
    let ns = Namespace::new(&settings, "bench", args.stockd_exe()?)?;
    let _lock = ns.lock().await?;
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
        commit: stack::machine::checkout_commit(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        concurrency: args.concurrency,
        machine,
        ratios: report::ratios::compute(&collected.phases, &collected.memory),
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
        "\n!!!!!!!! stockd-bench: CORRECTNESS VIOLATED — the numbers above do not count !!!!!!!!"
    );
    for v in &violations {
        eprintln!("  ✗ {v}");
    }
    Ok(ExitCode::FAILURE)
}

fn now_rfc3339() -> String {
    stockd::clock::rfc3339_ms(stockd::clock::unix_ms())
}
