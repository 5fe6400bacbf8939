//! `stockd-bench`: parse the command line, refuse production, load stockd's
//! configuration, run the suite, the demo or the report (`lib.rs` says which).

use std::process::ExitCode;

use clap::Parser;

use stockd::config::{config_dir, env_name, Settings};
use stockd_bench::args::BenchArgs;

/// The allocator of the `stockd` binary, for the same reason (its main.rs):
/// the ceiling phase drives Redis from this process, and the bench's own CPU
/// is a column of the tables.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = BenchArgs::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    match runtime.block_on(run(args)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("stockd-bench: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    // Before the configuration is read: the bench must never touch production.
    stockd_bench::refuse_production(&env_name())?;
    let settings = Settings::load(&config_dir(), &env_name())?;
    // The bench prints a progress line; the in-process roles' INFO lines
    // would tear it. RUST_LOG still wins.
    let mut quiet = settings.logging.clone();
    quiet.level = "warn".into();
    stockd::telemetry::init_logging(&quiet);
    stockd_bench::run(args, settings).await
}
