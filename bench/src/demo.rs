//! `stockd-bench --demo` (`make demo`): the flash sale as a user would watch it.
//! 100 units, 20,000 requests from 5,000 users who each click four times in a
//! row, limit one per user, every role running in a child stockd. It prints what
//! sold, what was refused and why, how long it took, and the invariants.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::args::BenchArgs;
use crate::drive::api::{Api, Reserver, UserOf};
use crate::drive::load::{drive, Plan, Run};
use crate::report::numbers::thousands;
use crate::stack::check::{self, Expect, Stores, Target};
use crate::stack::child::StockdChild;
use crate::stack::namespace::Namespace;
use stockd::config::{Durability, Settings};
use stockd::domain::SkuId;

const UNITS: i64 = 100;
const REQUESTS: u64 = 20_000;
const USERS: u64 = 5_000;
/// Requests per user, sent back to back: the impatient double (quadruple) click.
const CLICKS_PER_USER: u64 = REQUESTS / USERS;
const LIMIT_PER_USER: i64 = 1;
const SKU: u64 = 1;
/// The demo promises "under a minute"; the sale itself gets at most this long.
const SALE_MAX: Duration = Duration::from_secs(45);

pub async fn run(args: BenchArgs, settings: Settings) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let ns = Namespace::new(&settings, "demo", args.stockd_exe()?)?;
    let _lock = ns.lock().await?;
    ns.cleanup().await?;
    std::fs::create_dir_all(&args.out_dir)?;
    let child =
        StockdChild::start(&ns, Durability::Queue, "demo", Path::new(&args.out_dir)).await?;
    let stores = ns.stores()?;
    let target = Target::child(child.addr, &ns.admin_token, &stores);
    Api::new(child.addr, &ns.admin_token)
        .put_sku(SKU, UNITS, LIMIT_PER_USER)
        .await?;
    println!(
        "flash sale: {UNITS} units, {} requests from {} users ({CLICKS_PER_USER} clicks each), \
         limit {LIMIT_PER_USER} per user, {} at a time, all roles running",
        thousands(REQUESTS as f64),
        thousands(USERS as f64),
        args.concurrency
    );
    let workers = (0..args.concurrency)
        .map(|_| Reserver::new(child.addr, SKU, "d", UserOf::Clicks(CLICKS_PER_USER)))
        .collect();
    let plan = Plan {
        requests: REQUESTS,
        max_duration: SALE_MAX,
        rate_per_sec: None,
    };
    let run = drive("flash sale", plan, workers).await;
    print_sale(&run);
    let violations = check_sale(&target, &stores, &run).await?;
    child.stop().await?;
    stores.db.disconnect().await;
    if !args.keep {
        ns.cleanup().await?;
    }
    let green = violations.is_empty();
    println!(
        "\n{} in {:.1} s (including start-up and drain)",
        if green {
            "all green"
        } else {
            "INVARIANT VIOLATED"
        },
        started.elapsed().as_secs_f64()
    );
    Ok(if green {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What sold, what was refused and why, and how long it took.
fn print_sale(run: &Run) {
    let sold = run.tally.done as i64;
    println!("\n  {:<24} {:>7}", "units sold", sold);
    for (label, n) in &run.tally.by_label {
        if !label.starts_with("20") {
            let reason = label.strip_prefix("409 ").unwrap_or(label);
            println!(
                "  {:<24} {:>7}",
                format!("refused {reason}"),
                thousands(*n as f64)
            );
        }
    }
    let p = run.latency.unwrap_or_default();
    println!(
        "  {:<24} {:>7.2} s  ({} req/s, p50 {:.2} ms, p99 {:.2} ms)",
        "time taken",
        run.elapsed.as_secs_f64(),
        thousands(run.throughput()),
        p.p50_ms,
        p.p99_ms
    );
}

/// Checks and prints the sale's invariants; returns the violated ones.
async fn check_sale(
    target: &Target<'_>,
    stores: &Stores,
    run: &Run,
) -> anyhow::Result<Vec<String>> {
    let sold = run.tally.done as i64;
    let sku = SkuId::new(SKU)?;
    let expect = Expect {
        sku,
        total: UNITS,
        admitted: sold,
    };
    let mut lines = vec![(
        format!("every request answered ({} of {})", run.requests, REQUESTS),
        run.requests == REQUESTS,
    )];
    lines.push((
        format!("sold out exactly: {sold} of {UNITS} units sold"),
        sold == UNITS,
    ));
    let mut violations = check::after_phase(target, expect, &run.tally).await;
    let over = check::users_over_limit(&stores.db, sku, LIMIT_PER_USER).await?;
    lines.push((
        format!("no user holds more than {LIMIT_PER_USER} (users over: {over})"),
        over == 0,
    ));
    lines.push((
        "no oversell, no 5xx; after drain MySQL available == Redis available; ledger live units == stock taken".into(),
        violations.is_empty(),
    ));
    println!("\ninvariants");
    for (text, ok) in &lines {
        println!("  {} {text}", if *ok { "✓" } else { "✗" });
    }
    for v in &violations {
        println!("    ✗ {v}");
    }
    violations.extend(lines.iter().filter(|(_, ok)| !ok).map(|(t, _)| t.clone()));
    Ok(violations)
}
