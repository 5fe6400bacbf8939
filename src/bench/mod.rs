//! `stockd bench`: the load generator (placeholder; see issue "Benchmarks").

use std::process::ExitCode;

use crate::config::Settings;

/// Options of `stockd bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Run the flash-sale demo instead of the benchmark.
    #[arg(long)]
    pub demo: bool,
}

pub async fn run(_args: BenchArgs, _settings: Settings) -> anyhow::Result<ExitCode> {
    anyhow::bail!("stockd bench is not built yet")
}
