//! `stockd`: parse the command line, load configuration, start telemetry, then
//! dispatch to a role or a one-shot subcommand.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tokio_util::sync::CancellationToken;

use stockd::cli::{Cli, Command, ConfigAction};
use stockd::config::{config_dir, env_name, Settings};
use stockd::{db, resources::Resources, roles, shutdown, telemetry};

/// mimalloc instead of glibc malloc: fewer cycles per allocation on the
/// request path and no contention between the runtime's threads
/// (docs/benchmarks-history.md, "CPU efficiency"). Built without its transparent huge page
/// advice (`no_thp` in Cargo.toml), which cost ~50 MiB of peak RSS for no
/// measurable CPU (docs/benchmarks-history.md, "Memory").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before the configuration is read: the refusal must not depend on it.
    if let Some(Command::Bench { .. }) = cli.command {
        eprintln!("stockd: error: {}", stockd::cli::BENCH_MOVED);
        return ExitCode::FAILURE;
    }
    // For the audit and dlq jobs, exit code 1 means "found something"; failing
    // to load the configuration or reach a store is 2, "nothing judged".
    let error_code = match cli.command {
        Some(Command::Audit { .. } | Command::Dlq { .. }) => {
            ExitCode::from(stockd::cli_jobs::EXIT_UNREADABLE)
        }
        _ => ExitCode::FAILURE,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("stockd: error: {err:#}");
            error_code
        }
    }
}

fn load_settings(cli: &Cli) -> anyhow::Result<Settings> {
    let mut settings = stockd::config_check::load(&config_dir(), &env_name())?;
    if let Some(bind) = &cli.bind {
        // The flag is the last layer: it is checked as every other layer
        // was, the production check included (a public bind needs TLS).
        settings.http.bind = bind.clone();
        settings.validate()?;
        if stockd::config::production_applies_to(&env_name()) {
            stockd::config::production_check(&settings, &env_name())?;
        }
    }
    Ok(settings)
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let settings = load_settings(&cli)?;
    match (&cli.command, cli.role) {
        (Some(Command::Config { action }), _) => config_job(action, &settings),
        (Some(Command::Bench { .. }), _) => anyhow::bail!(stockd::cli::BENCH_MOVED),
        (Some(Command::Warmup { skus, all, force }), _) => {
            telemetry::init_logging(&settings.logging);
            let res = Resources::connect(settings, "stockd-warmup").await?;
            let code = stockd::cli_jobs::warmup(&res, skus, *all, *force).await;
            res.close().await;
            code
        }
        (Some(Command::Reconcile { once, repair, json }), _) => {
            telemetry::init_logging(&settings.logging);
            let res = Resources::connect(settings, "stockd-reconcile").await?;
            let cancel = CancellationToken::new();
            shutdown::cancel_on_signal(cancel.clone());
            let code = stockd::cli_jobs::reconcile(&res, *once, *repair, *json, cancel).await;
            res.close().await;
            code
        }
        (Some(Command::Audit { json, skus }), _) => {
            telemetry::init_logging(&settings.logging);
            let res = Resources::connect(settings, "stockd-audit").await?;
            let code = stockd::cli_jobs::audit(&res, skus, *json).await;
            res.close().await;
            Ok(code)
        }
        (Some(Command::Dlq { action }), _) => {
            telemetry::init_logging(&settings.logging);
            let res = Resources::connect(settings, "stockd-dlq").await?;
            let code = stockd::cli_dlq::run(&res, action).await;
            res.close().await;
            Ok(code)
        }
        (Some(Command::Migrate), _) => migrate_job(&settings).await,
        (None, Some(role)) => {
            telemetry::init_logging(&settings.logging);
            telemetry::metrics_handle();
            let cancel = CancellationToken::new();
            shutdown::cancel_on_signal(cancel.clone());
            let name = format!("stockd-{role:?}").to_lowercase();
            roles::start(role, settings, &name, cancel).await?;
            Ok(ExitCode::SUCCESS)
        }
        (None, None) => anyhow::bail!(
            "nothing to do: pass --role api|consumer|closer|reconciler|all or a subcommand (see --help)"
        ),
    }
}

/// `stockd config check|print`.
fn config_job(action: &ConfigAction, settings: &Settings) -> anyhow::Result<ExitCode> {
    match action {
        ConfigAction::Check => println!("configuration OK (environment {})", env_name()),
        ConfigAction::Print => print!("{}", settings.redacted_yaml()?),
    }
    Ok(ExitCode::SUCCESS)
}

/// `stockd migrate`: create the database if needed, apply pending migrations.
async fn migrate_job(settings: &Settings) -> anyhow::Result<ExitCode> {
    telemetry::init_logging(&settings.logging);
    let applied = db::migrate::migrate_with(&settings.mysql)
        .await
        .context("migrating (mysql.url, mysql.tls)")?;
    if applied.is_empty() {
        println!("migrate: schema is up to date");
    } else {
        println!("migrate: applied {}", applied.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
