//! One-shot operator jobs behind `stockd warmup`, `stockd reconcile`,
//! `stockd audit` and `stockd dlq`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::domain::SkuId;
use crate::ops::reconcile::{Reconciler, Report};
use crate::ops::warmup::{warmup as warm, WarmupOutcome};
use crate::resources::Resources;

/// Pause before a one-shot repair's second look (see `reconcile`).
const ONCE_SECOND_LOOK: Duration = Duration::from_secs(1);
/// Width of the terminal progress bar, in characters.
const BAR_WIDTH: usize = 30;
/// `stockd audit`: an invariant does not hold (`stockd dlq`: work left undone).
pub const EXIT_VIOLATION: u8 = 1;
/// `stockd audit` / `stockd dlq`: a store could not be read, nothing judged.
pub const EXIT_UNREADABLE: u8 = 2;
/// Fewer SKUs than this audit without a progress line (it would only flicker).
const PROGRESS_MIN_SKUS: usize = 20;

/// `stockd warmup`: exit 0 when every SKU was warmed, 1 otherwise.
pub async fn warmup(
    res: &Resources,
    skus: &[u64],
    all: bool,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let ids = warmup_ids(res, skus, all).await?;
    let bar = std::io::stderr().is_terminal() && ids.len() > 1;
    let mut failed = 0;
    for (done, sku) in ids.iter().enumerate() {
        let (line, warmed) = warm_one(res, *sku, force).await;
        if !warmed {
            failed += 1;
        }
        if bar {
            show_progress(done + 1, ids.len(), &line);
        } else {
            println!("warmup: {line}");
        }
    }
    if bar {
        eprintln!();
    }
    println!(
        "warmup: {} of {} SKUs warmed",
        ids.len() - failed,
        ids.len()
    );
    let _ = std::io::stdout().flush();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The SKUs `stockd warmup` was asked for: every SKU in MySQL with `--all`,
/// else each `--sku`.
async fn warmup_ids(res: &Resources, skus: &[u64], all: bool) -> anyhow::Result<Vec<SkuId>> {
    if all {
        return Ok(crate::db::sku::all_ids(&res.db).await?);
    }
    skus.iter()
        .map(|&raw| SkuId::new(raw).map_err(|e| anyhow::anyhow!("--sku {raw}: {e}")))
        .collect()
}

/// Warms one SKU: the line that reports it, and whether it was warmed.
async fn warm_one(res: &Resources, sku: SkuId, force: bool) -> (String, bool) {
    let outcome = warm(
        &res.db,
        &res.redis,
        &res.publisher,
        sku,
        force,
        &res.settings.reconcile,
    )
    .await;
    match outcome {
        Ok(WarmupOutcome::Warmed { available, .. }) => {
            (format!("sku {sku}: warmed, available {available}"), true)
        }
        Ok(WarmupOutcome::Refused(reason)) => (
            format!("sku {sku}: REFUSED: {reason} (use --force to override)"),
            false,
        ),
        Ok(WarmupOutcome::NotFound) => (format!("sku {sku}: NOT FOUND in MySQL"), false),
        Err(err) => (format!("sku {sku}: ERROR: {err}"), false),
    }
}

/// The terminal progress bar after `done` of `total` SKUs, with `line` below
/// it unless the SKU was simply warmed.
fn show_progress(done: usize, total: usize, line: &str) {
    let filled = done * BAR_WIDTH / total;
    eprint!(
        "\r[{}{}] {}/{} ",
        "#".repeat(filled),
        " ".repeat(BAR_WIDTH - filled),
        done,
        total
    );
    if !line.contains("warmed") {
        eprintln!("\n{line}");
    }
}

/// `stockd reconcile`: with `--once` exit 0 when healthy, 1 otherwise; without,
/// check every `reconcile.interval_ms` until interrupted.
pub async fn reconcile(
    res: &Resources,
    once: bool,
    repair: bool,
    json: bool,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let interval = Duration::from_millis(res.settings.reconcile.interval_ms);
    let reconciler = Reconciler::from_resources(res);
    loop {
        let mut report = reconciler.run_once(&[], repair).await?;
        if once && report.second_look_wanted(repair) {
            // REDIS_BEHIND is repaired, and lost MySQL work judged, only when
            // two checks agree: a one-shot run looks twice, a moment apart,
            // instead of never.
            crate::shutdown::sleep_or_cancel(ONCE_SECOND_LOOK, &cancel).await;
            report = reconciler.run_once(&[], repair).await?;
        }
        print_report(&report, json)?;
        if once {
            return Ok(if report.healthy() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        if !crate::shutdown::sleep_or_cancel(interval, &cancel).await {
            return Ok(ExitCode::SUCCESS);
        }
    }
}

fn print_report(report: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    println!("checked at {}", report.checked_at);
    println!(
        "{:>12} {:<19} {:>10} {:>10} {:>10} {:>10} {:>7} {:>9}",
        "sku", "verdict", "redis", "mysql", "ledger", "in_flight", "drift", "repaired"
    );
    for s in &report.skus {
        let redis = s.redis_available.map_or("-".to_string(), |v| v.to_string());
        println!(
            "{:>12} {:<19} {:>10} {:>10} {:>10} {:>10} {:>7} {:>9}",
            s.sku_id,
            s.verdict.as_str(),
            redis,
            s.mysql_available,
            s.ledger_units,
            s.in_flight,
            s.drift,
            s.repaired
        );
    }
    Ok(())
}

/// `stockd audit`: exit 0 when every invariant holds, 1 on a violation, 2 when
/// a store could not be read.
pub async fn audit(res: &Resources, skus: &[u64], json: bool) -> ExitCode {
    let ids: Result<Vec<SkuId>, _> = skus.iter().map(|&raw| SkuId::new(raw)).collect();
    let ids = match ids {
        Ok(ids) => ids,
        Err(err) => {
            eprintln!("stockd audit: --sku: {err}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let tty = std::io::stderr().is_terminal();
    let mut progress = |done: usize, total: usize| {
        if tty && total >= PROGRESS_MIN_SKUS {
            eprint!("\raudit: {done}/{total} SKUs ");
            if done == total {
                eprintln!();
            }
        }
    };
    let report = match crate::ops::invariants::run(res, &ids, &mut progress).await {
        Ok(report) => report,
        Err(err) => {
            eprintln!("stockd audit: a store could not be read: {err}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("the report serializes")
        );
    } else {
        print!("{}", report.table());
    }
    let _ = std::io::stdout().flush();
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_VIOLATION)
    }
}
