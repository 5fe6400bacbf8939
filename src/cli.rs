//! Command line: `stockd --role ROLE` runs a role; subcommands are one-shot jobs.

use clap::{Parser, Subcommand};

use crate::roles::Role;

#[derive(Debug, Parser)]
#[command(
    name = "stockd",
    version,
    about = "Flash-sale inventory deduction service"
)]
pub struct Cli {
    /// Role to run when no subcommand is given.
    #[arg(long, value_enum)]
    pub role: Option<Role>,

    /// Override `http.bind` (the api role's listen address).
    #[arg(long, global = true)]
    pub bind: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the database if needed and apply pending migrations from sql/.
    Migrate,
    /// Load generator: ceiling, reserve, sold-out, strawman, consumer phases.
    Bench(crate::bench::BenchArgs),
    /// Copy MySQL available stock and SKU config into Redis (refused while
    /// deductions are in flight unless --force).
    Warmup {
        /// SKU to warm up (repeatable).
        #[arg(long = "sku", required_unless_present = "all", conflicts_with = "all")]
        skus: Vec<u64>,
        /// Every SKU in MySQL.
        #[arg(long)]
        all: bool,
        /// Proceed even with deductions in flight.
        #[arg(long)]
        force: bool,
    },
    /// Compare Redis, MySQL and the ledger per SKU (SPEC §8).
    Reconcile {
        /// One check, then exit 0 if every SKU is OK/IN_FLIGHT, 1 otherwise.
        #[arg(long)]
        once: bool,
        /// Repair drift (REDIS_AHEAD at once, REDIS_BEHIND once stable).
        #[arg(long)]
        repair: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Load and validate every layer; exit non-zero naming the bad key.
    Check,
    /// Print the effective configuration with secrets redacted.
    Print,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn verify_cli() {
        super::Cli::command().debug_assert();
    }
}
