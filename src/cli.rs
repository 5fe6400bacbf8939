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
    /// The load generator is the `stockd-bench` binary: every `stockd bench ...`,
    /// `--help` included, lands here and is refused with [`BENCH_MOVED`].
    #[command(hide = true, disable_help_flag = true)]
    Bench {
        /// Whatever followed `bench`; never read.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        ignored: Vec<String>,
    },
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
    /// Compare Redis, MySQL and the ledger per SKU (contract §8).
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
    /// Read-only check of the contract §10 invariants (contract §16 lists which) across MySQL, Redis and the
    /// broker. Exit 0 when all hold, 1 on any violation, 2 when a store could
    /// not be read. Run it once the pipeline drained.
    Audit {
        /// Print `{"checked_at","ok","checks":[...]}` instead of the table.
        #[arg(long)]
        json: bool,
        /// Audit only this SKU (repeatable); default every SKU in MySQL.
        #[arg(long = "sku")]
        skus: Vec<u64>,
    },
    /// Dead-lettered deductions: list, replay to the work queue, or drop.
    Dlq {
        #[command(subcommand)]
        action: DlqAction,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
}

/// Where `stockd bench` went: the load generator is the `stockd-bench` binary
/// of the workspace (bench/), never part of the product.
pub const BENCH_MOVED: &str = "the load generator is not part of stockd: run `stockd-bench` \
(`cargo build --release --workspace` builds it beside stockd; `make bench`, `make demo`)";

#[derive(Debug, Subcommand)]
pub enum DlqAction {
    /// Show every dead-lettered deduction (non-destructive).
    List(DlqArgs),
    /// Republish dead-lettered deductions to their work queue (publisher
    /// confirms), then remove them from the DLQ. Safe: the consumer is idempotent.
    Replay(DlqArgs),
    /// Delete dead letters for good, printing what was dropped.
    Drop {
        #[command(flatten)]
        args: DlqArgs,
        /// Required: dropping loses the deductions.
        #[arg(long)]
        yes: bool,
    },
}

/// Options shared by the `dlq` actions.
#[derive(Debug, Clone, clap::Args)]
pub struct DlqArgs {
    /// Only deductions of this SKU (others stay in the DLQ).
    #[arg(long)]
    pub sku: Option<u64>,
    /// Which dead-letter queue.
    #[arg(long, value_enum, default_value = "deduct")]
    pub queue: crate::ops::dlq::DlqKind,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Most messages read in this run.
    #[arg(long, default_value_t = crate::ops::dlq::DEFAULT_MAX_MESSAGES)]
    pub max: usize,
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

    /// `stockd bench --help` (and any other bench arguments) parse to the
    /// refusal that names `stockd-bench`, not to clap's unknown-subcommand error.
    #[test]
    fn every_bench_call_parses_to_the_pointer_at_stockd_bench() {
        use clap::Parser;
        for args in [
            &["stockd", "bench", "--help"][..],
            &["stockd", "bench", "--only", "hot-sku"],
        ] {
            let cli = super::Cli::try_parse_from(args).unwrap();
            assert!(
                matches!(cli.command, Some(super::Command::Bench { .. })),
                "{args:?}"
            );
        }
    }
}
