//! A drop: the sale of one SKU opens at T (contract §19) to buyers who carry
//! a pass (§20), with the hold budget on (§12), and a crowd is already on
//! its connections, refreshing, when it opens. The child (durability queue)
//! verifies HS256 passes, issues them (`POST /v1/passes`, before T, not
//! timed, one per buyer) and runs against a private redis-server, so
//! `INFO commandstats` counts its calls alone.
//!
//! The timeline, by the machine's one clock (Redis's `TIME` reads it too):
//!
//! 1. a quiet second before the crowd: the child's background loops alone;
//! 2. the crowd arrives [`CROWD_BEFORE`] before T and is answered from
//!    memory until `sale.clock_margin_ms` before T — its Redis calls are
//!    read when every answer of that step is in, and must have run no
//!    script (no admission, no claim);
//! 3. within the margin Redis decides; at T the crowd is let in and buys
//!    until every buyer has an answer (the stock sells out: more buyers
//!    than units);
//! 4. after the sale, requests with a forged pass: refused in memory, no
//!    script either.
//!
//! Measured: T → sold out, the p99 of the first second's answers, the
//! answers before T by code, the Redis calls of each window, holds per
//! second. Checked: no hold answered before T or made before T by the
//! ledger, no pass used twice (each buyer has one: holds per buyer), the
//! standard checks (no oversell, the stores agree after the drain).

use std::path::Path;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::json;
use tokio::time::Instant;

use super::Checked;
use crate::drive::crowd::{Buyer, Crowd};
use crate::measure::drop_windows::{self, Windows};
use crate::measure::stats::Tally;
use crate::results::{key, DropSale, Memory, PhaseResult, RedisWindow};
use crate::stack::check::{self, Expect, Stores, Target};
use crate::stack::child::StockdChild;
use crate::stack::namespace::Namespace;
use crate::stack::private_redis::{command_calls, CommandCalls, PrivateRedis};
use stockd::config::{Durability, RedisMode};
use stockd::domain::SkuId;

/// Label (and log file name) of the drop's child.
pub const CHILD_LABEL: &str = "child-drop";
/// Units on sale.
const STOCK: i64 = 2_000;
/// The crowd's connections: a busy sale's many buyers at once (as many as
/// the fan-in phase's).
pub const CONNECTIONS: usize = 1_000;
/// Buyers with a pass: one more per connection than there are units, so
/// the stock sells out and the last ones meet `SOLD_OUT`.
const BUYERS: u64 = STOCK as u64 + CONNECTIONS as u64;
/// `limits.buyer_max_live_units` of the child: on, above the one unit each
/// buyer holds (its cost is measured, not its refusals).
const BUDGET: u32 = 2;
/// The crowd arrives this long before T: the margin's second, and before
/// it a second and a half answered from memory plus the guard below.
const CROWD_BEFORE: Duration = Duration::from_secs(3);
/// The quiet window before the crowd (the background loops' calls).
const QUIET: Duration = Duration::from_secs(1);
/// Between the PUT that sets T and the quiet window: time for the api's
/// board to hear the new terms (`T:<sku>` on the sold-out channel).
const BOARD_LEAD: Duration = Duration::from_secs(1);
/// The early step stops sending this long before the margin, so its last
/// request is answered (from memory) before Redis would be asked: longer
/// than the worst answer of 1,000 connections on a busy 2-core machine
/// (~200 ms was seen; the phase fails, saying so, when it was not enough).
const MARGIN_GUARD: Duration = Duration::from_millis(500);
/// Longest sale after T: a slow machine still ends the phase.
const SALE_MAX: Duration = Duration::from_secs(30);
/// Life of the issued passes: the whole phase, with room.
const PASS_TTL_SECS: u64 = 600;
/// Connections issuing the passes before T.
const ISSUERS: usize = 8;
/// Requests with a forged pass after the sale, and their connections.
const FORGED: u64 = 2_000;
const FORGED_CONNECTIONS: usize = 16;
/// The key id of the child's HS256 secret.
const KEY_ID: &str = "bench-drop";

/// Starts the drop's child on a private Redis, runs the drop, stops both.
pub async fn run(ns: &Namespace, out_dir: &Path, sku: u64) -> anyhow::Result<(Checked, Memory)> {
    let redis = PrivateRedis::start().await?;
    let mut settings = ns.settings.clone();
    settings.redis.mode = RedisMode::Standalone;
    settings.redis.url = redis.url.clone();
    settings.redis.urls.clear();
    let ns = Namespace::new(&settings, "bench", ns.stockd_exe.clone())?;
    let secret = out_dir.join("drop-pass-hs256.secret");
    let random = || uuid::Uuid::new_v4().simple().to_string();
    std::fs::write(&secret, format!("{}{}\n", random(), random()))?;
    let keys = format!(
        "[{{id: {KEY_ID}, hs256_secret_file: \"{}\"}}]",
        secret.display()
    );
    let budget = BUDGET.to_string();
    let env = [
        ("STOCKD__REDIS__MODE", "standalone"),
        ("STOCKD__REDIS__URL", redis.url.as_str()),
        ("STOCKD__PASSES__KEYS", keys.as_str()),
        ("STOCKD__PASSES__ISSUER_KEY", KEY_ID),
        ("STOCKD__LIMITS__BUYER_MAX_LIVE_UNITS", budget.as_str()),
    ];
    let child = StockdChild::start_with(&ns, Durability::Queue, CHILD_LABEL, out_dir, &env).await;
    // Read at start-up only: the secret leaves the disk once the child runs.
    let _ = std::fs::remove_file(&secret);
    let child = child?;
    let stores = ns.stores()?;
    let target = Target::child(child.addr, &ns.admin_token, &stores);
    let margin = Duration::from_millis(ns.settings.sale.clock_margin_ms);
    let checked = drop_sale(&target, &stores, &redis, sku, margin).await;
    let memory = Memory {
        process: format!("stockd --role all ({CHILD_LABEL})"),
        pid: child.pid(),
        peak_rss_mib: child.peak_rss_mib()?,
    };
    child.stop().await?;
    stores.db.disconnect().await;
    ns.cleanup().await?;
    Ok((checked?, memory))
}

/// Redis' counters at the four reading points of the timeline.
struct Readings {
    quiet_from: (Instant, CommandCalls),
    crowd_from: (Instant, CommandCalls),
    margin_from: (Instant, CommandCalls),
    opening: (Instant, CommandCalls),
}

async fn drop_sale(
    target: &Target<'_>,
    stores: &Stores,
    redis: &PrivateRedis,
    sku: u64,
    margin: Duration,
) -> anyhow::Result<Checked> {
    let mut api = target.api();
    let far = stockd::clock::unix_ms() + 3_600_000;
    api.put_sku_json(sku, &terms(far)).await?;
    let buyers = issue_passes(target, sku).await?;
    let lead = BOARD_LEAD + QUIET + CROWD_BEFORE;
    let opens_ms = stockd::clock::unix_ms() + lead.as_millis() as u64;
    let opening = Instant::now() + lead;
    api.put_sku_json(sku, &terms(opens_ms)).await?;
    tokio::time::sleep_until(opening - CROWD_BEFORE - QUIET).await;
    let quiet_from = (Instant::now(), redis.command_calls().await?);
    tokio::time::sleep_until(opening - CROWD_BEFORE).await;
    let crowd_from = (Instant::now(), redis.command_calls().await?);
    let mut crowd = Crowd::new(
        target.addr,
        sku,
        "drop",
        buyers.clone(),
        CONNECTIONS,
        opening,
    );
    crowd.run_until(opening - margin - MARGIN_GUARD).await;
    let margin_from = (Instant::now(), redis.command_calls().await?);
    let early_overran = margin_from.0.checked_duration_since(opening - margin);
    let url = redis.url.clone();
    let at_opening = tokio::spawn(async move {
        tokio::time::sleep_until(opening).await;
        (Instant::now(), command_calls(&url).await)
    });
    crowd.run_until(opening + SALE_MAX).await;
    let (at, calls) = at_opening.await?;
    let readings = Readings {
        quiet_from,
        crowd_from,
        margin_from,
        opening: (at, calls?),
    };
    let (refused, redis_refused, forged_violations) =
        forged_passes(target, redis, sku, &buyers, opening).await?;
    let margin_us = margin.as_micros() as i64;
    let windows = drop_windows::of_answers(crowd.answers(), margin_us, STOCK as u64);
    let mut tally = Tally::default();
    crowd.answers().for_each(|a| tally.add(&a.outcome));
    let expect = Expect {
        sku: SkuId::new(sku)?,
        total: STOCK,
        admitted: tally.done as i64,
    };
    let mut violations = check::after_phase(target, expect, &tally).await;
    violations.extend(forged_violations);
    violations.extend(window_violations(&windows, crowd.done()));
    violations.extend(ledger_violations(stores, expect.sku, opens_ms).await?);
    let sale = DropSale {
        stock: STOCK,
        buyers: BUYERS,
        connections: CONNECTIONS,
        crowd_before_ms: CROWD_BEFORE.as_millis() as u64,
        clock_margin_ms: margin.as_millis() as u64,
        buyer_max_live_units: BUDGET,
        held: windows.held,
        sold_out_after_ms: windows.sold_out_after_ms,
        holds_per_sec: windows
            .sold_out_after_ms
            .map_or(0.0, |ms| windows.held as f64 * 1000.0 / ms.max(1.0)),
        answers_per_sec: windows.after_t_answers as f64 * 1e6
            / windows.last_answer_us.max(1) as f64,
        first_second: windows.first_second.map(Into::into),
        first_second_answers: windows.first_second_answers,
        before_margin: windows.before_margin.clone(),
        within_margin: windows.within_margin.clone(),
        redis_quiet: window(&readings.quiet_from, &readings.crowd_from),
        redis_before_margin: window(&readings.crowd_from, &readings.margin_from),
        redis_within_margin: window(&readings.margin_from, &readings.opening),
        refused_passes: refused,
        redis_refused_passes: redis_refused,
    };
    violations.extend(redis_violations(&sale));
    if let Some(late) = early_overran {
        violations.push(format!(
            "drop: the early step's last answer came {late:?} after T − margin: its Redis \
             calls are not those of answers from memory alone (a machine too slow for the crowd)"
        ));
    }
    Ok(Checked::one(result(sale, &tally, opening), violations))
}

/// The SKU's terms with the sale opening at `opens_ms`, passes required.
fn terms(opens_ms: u64) -> serde_json::Value {
    json!({
        "total_stock": STOCK,
        "limit_per_user": 1,
        "sale": {"opens_at": stockd::clock::rfc3339_ms(opens_ms), "closes_at": null},
        "requires_pass": true,
    })
}

/// A pass for each of [`BUYERS`] buyers (users `1..=BUYERS`), issued by the
/// child over [`ISSUERS`] connections.
async fn issue_passes(target: &Target<'_>, sku: u64) -> anyhow::Result<Vec<Buyer>> {
    let tasks: Vec<_> = (0..ISSUERS as u64)
        .map(|first| {
            let mut api = target.api();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for user in (first + 1..=BUYERS).step_by(ISSUERS) {
                    let pass = api.issue_pass(user, &[sku], PASS_TTL_SECS).await?;
                    mine.push(Buyer { user, pass });
                }
                anyhow::Ok(mine)
            })
        })
        .collect();
    let mut buyers = Vec::new();
    for task in tasks {
        buyers.extend(task.await??);
    }
    buyers.sort_by_key(|b| b.user);
    Ok(buyers)
}

/// After the sale: [`FORGED`] requests whose pass's signature was altered;
/// each must be 403 `PASS_INVALID`, with no script run.
async fn forged_passes(
    target: &Target<'_>,
    redis: &PrivateRedis,
    sku: u64,
    buyers: &[Buyer],
    opening: Instant,
) -> anyhow::Result<(u64, RedisWindow, Vec<String>)> {
    let forged = (buyers.iter().cycle().take(FORGED as usize))
        .map(|b| Buyer {
            user: b.user,
            pass: forge(&b.pass),
        })
        .collect();
    let mut crowd = Crowd::new(
        target.addr,
        sku,
        "forged",
        forged,
        FORGED_CONNECTIONS,
        opening,
    );
    let from = (Instant::now(), redis.command_calls().await?);
    crowd.run_until(Instant::now() + SALE_MAX).await;
    let to = (Instant::now(), redis.command_calls().await?);
    let mut tally = Tally::default();
    crowd.answers().for_each(|a| tally.add(&a.outcome));
    let refused = tally.by_label.get("403 PASS_INVALID").copied().unwrap_or(0);
    let mut violations = Vec::new();
    if refused != FORGED {
        violations.push(format!(
            "drop: {refused} of {FORGED} requests with a forged pass were 403 PASS_INVALID ({:?})",
            tally.by_label
        ));
    }
    Ok((refused, window(&from, &to), violations))
}

/// `pass` with one character of its signature changed (the last one may
/// carry only padding bits, so one further in).
fn forge(pass: &str) -> String {
    let at = pass.len() - 10;
    let new = if pass.as_bytes()[at] == b'A' {
        'B'
    } else {
        'A'
    };
    format!("{}{new}{}", &pass[..at], &pass[at + 1..])
}

fn window(from: &(Instant, CommandCalls), to: &(Instant, CommandCalls)) -> RedisWindow {
    let calls = to.1.since(&from.1);
    RedisWindow {
        ms: (to.0 - from.0).as_secs_f64() * 1000.0,
        calls: calls.total(),
        script_calls: calls.scripts(),
        by_command: calls.0,
    }
}

/// What the answers must show: nothing but `SALE_NOT_STARTED` from memory,
/// no hold before T, every buyer answered within the sale's time.
fn window_violations(w: &Windows, crowd_done: bool) -> Vec<String> {
    let mut bad = Vec::new();
    let other: u64 = (w.before_margin.iter())
        .filter(|(label, _)| label.as_str() != "409 SALE_NOT_STARTED")
        .map(|(_, n)| n)
        .sum();
    if other > 0 {
        bad.push(format!(
            "drop: {other} answers before T − margin were not SALE_NOT_STARTED ({:?})",
            w.before_margin
        ));
    }
    if w.held_before_t > 0 {
        bad.push(format!("drop: {} holds answered before T", w.held_before_t));
    }
    if !crowd_done {
        bad.push(format!("drop: buyers still waiting {SALE_MAX:?} after T"));
    }
    if w.held != STOCK as u64 {
        bad.push(format!(
            "drop: {} of {STOCK} units held: not sold out",
            w.held
        ));
    }
    bad
}

/// "An api answers `SALE_NOT_STARTED` from memory earlier than the margin"
/// and "a refused pass costs no Redis call": no script in those windows.
fn redis_violations(sale: &DropSale) -> Vec<String> {
    let mut bad = Vec::new();
    for (what, w) in [
        ("answers before T − margin", &sale.redis_before_margin),
        ("answers to forged passes", &sale.redis_refused_passes),
    ] {
        if w.script_calls > 0 {
            bad.push(format!(
                "drop: {} Redis script calls during the {what} ({:?})",
                w.script_calls, w.by_command
            ));
        }
    }
    bad
}

/// The ledger: no hold made before T (Redis's clock), no buyer — so no
/// pass, one each — holding twice.
async fn ledger_violations(
    stores: &Stores,
    sku: SkuId,
    opens_ms: u64,
) -> anyhow::Result<Vec<String>> {
    let mut conn = stores.db.conn().await?;
    let early: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM stock_deduct_idempotent WHERE sku_id = ? AND reserved_at_ms < ?",
            (sku.get(), opens_ms),
        )
        .await?;
    let twice: Option<i64> = conn
        .exec_first(
            "SELECT COUNT(*) FROM (SELECT user_id FROM stock_deduct_idempotent WHERE sku_id = ?
               GROUP BY user_id HAVING COUNT(*) > 1) AS twice",
            (sku.get(),),
        )
        .await?;
    let mut bad = Vec::new();
    if let Some(n) = early.filter(|n| *n > 0) {
        bad.push(format!("drop: {n} holds in the ledger made before T"));
    }
    if let Some(n) = twice.filter(|n| *n > 0) {
        bad.push(format!(
            "drop: {n} passes held twice (buyers with two holds)"
        ));
    }
    Ok(bad)
}

fn result(sale: DropSale, tally: &Tally, opening: Instant) -> PhaseResult {
    let elapsed = Duration::from_secs_f64(sale.sold_out_after_ms.unwrap_or(0.0) / 1000.0);
    let title = format!(
        "a drop: {} units, {} buyers with an HS256 pass each on {} connections from T − {} s, \
         hold budget on; holds/s from T to sold out",
        sale.stock,
        sale.buyers,
        sale.connections,
        sale.crowd_before_ms / 1000
    );
    let mut result = PhaseResult::from_rate(key::DROP, title, "holds/s", sale.held, elapsed);
    result.concurrency = sale.connections;
    result.throughput = sale.holds_per_sec;
    result.latency = sale.first_second;
    result.outcomes = tally.by_label.clone();
    let crowd_from = opening - CROWD_BEFORE;
    result.started_unix_ms = stockd::clock::unix_ms() - crowd_from.elapsed().as_millis() as u64;
    result.drop = Some(sale);
    result
}
