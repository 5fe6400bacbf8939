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
