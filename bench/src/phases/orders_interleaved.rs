//! The measurement behind the orders goal (issue 26: the total CPU of a
//! 3-line order at most twice that of one reservation), taken so that the
//! VM's drift cancels: reservations and orders in alternating rounds of one
//! child, each round's CPU counted from its first request until the consumer
//! has applied all of it in MySQL.
//!
//! Why not the `reserve_queue` and `orders` phases side by side: this VM's
//! speed moves by a quarter from one quarter-second to the next and by half
//! between minutes (a fixed CPU-bound loop, docs/benchmarks-history.md, "Orders"), and two
//! phases of 2–3 s each, one after the other, each catch a different moment:
//! over 21 runs their quotient read 1.79–2.32 with the code unchanged. Six
//! rounds of each kind, one after the other, put both kinds through the same
//! moments. And a round ends when MySQL holds what it admitted, so the
//! consumer's work is counted to the round that caused it, whichever kind
//! falls further behind (the load-only window of the sequential phases
//! leaves each kind's tail out, and orders have the longer tail).

use std::time::{Duration, Instant};

use anyhow::Context;

use super::orders::posters;
use super::reserve::workers_of;
use super::{both, Checked};
use crate::drive::api::{UserOf, WARMUP_USERS};
use crate::drive::load::{drive, Plan, Run};
use crate::drive::progress::note;
use crate::measure::cpu;
use crate::measure::stats::Tally;
use crate::results::PhaseResult;
use crate::stack::check::{self, Expect, Target};
use crate::stack::order_rows;
use stockd::domain::SkuId;

/// Rounds of each kind.
pub const ROUNDS: u64 = 6;
/// Lines per order: one unit of each of the three SKUs.
pub const LINES: usize = 3;
/// Unmeasured requests of each kind first.
const WARMUP: u64 = 2_000;
/// Time limit of a warm-up.
const WARMUP_MAX: Duration = Duration::from_secs(10);
/// Order ids of this phase start with this (the `orders` phase's with `o`):
/// the order-row check counts this phase's orders alone.
const ORDER_TAG: &str = "x";
/// First buyer of the measured rounds: above the sequential phases' buyers
/// (`1..=requests`) and below the warm-ups' ([`WARMUP_USERS`]).
const FIRST_BUYER: u64 = 1 << 40;

/// The SKUs of the phase: one for reservations, three for orders.
#[derive(Debug, Clone, Copy)]
pub struct Skus {
    pub single: u64,
    pub order: [u64; LINES],
}

/// One kind's rounds summed.
#[derive(Default)]
struct Kind {
    tally: Tally,
    done: u64,
    load: Duration,
    cpu_ms: std::collections::BTreeMap<String, f64>,
    redis_servers_ms: std::collections::BTreeMap<String, f64>,
}

impl Kind {
    /// One round: its load, the wait until MySQL applied it, and the CPU
    /// of both, told on one progress line.
    fn add(&mut self, run: &Run, cpu: cpu::Elapsed, drain: Duration) {
        let total: f64 = cpu.by_label.values().sum();
        note(&format!(
            "  round: {} in {:.0} ms, applied {:.0} ms later; {:.0} µs of CPU each",
            run.tally.done,
            run.elapsed.as_secs_f64() * 1000.0,
            drain.as_secs_f64() * 1000.0,
            total * 1000.0 / run.tally.done.max(1) as f64
        ));
        self.tally.merge(run.tally.clone());
        self.done += run.tally.done;
        self.load += run.elapsed;
        for (k, v) in cpu.by_label {
            *self.cpu_ms.entry(k).or_default() += v;
        }
        for (k, v) in cpu.by_redis_server {
            *self.redis_servers_ms.entry(k).or_default() += v;
        }
    }

    /// The kind as a phase: CPU per event is `cpu_ms / count`.
    fn result(
        &self,
        key: &'static str,
        title: String,
        unit: &'static str,
        c: usize,
    ) -> PhaseResult {
        let run = Run {
            requests: self.done,
            elapsed: self.load,
            latency: None,
            tally: self.tally.clone(),
            cpu_ms: self.cpu_ms.clone(),
            redis_servers_ms: self.redis_servers_ms.clone(),
        };
        PhaseResult::from_run(key, title, unit, c, &run)
    }
}

/// `plan.requests` reservations and as many 3-line orders, in [`ROUNDS`]
/// alternating rounds, against a child stockd whose stores the checks read.
/// Results: `keys.0` the reservations, `keys.1` the orders.
pub async fn run(
    target: &Target<'_>,
    keys: (&'static str, &'static str),
    skus: Skus,
    plan: Plan,
    concurrency: usize,
) -> anyhow::Result<Checked> {
    let stores = target
        .stores
        .context("the interleaved phase checks the stores directly: a child stockd only")?;
    let per_round = plan.requests.div_ceil(ROUNDS).max(1);
    let total = i64::try_from(WARMUP + per_round * ROUNDS)?;
    let mut api = target.api();
    api.put_sku(skus.single, total, 1).await?;
    for sku in skus.order {
        api.put_sku(sku, total, 1).await?;
    }
    let single = SkuId::new(skus.single)?;
    let order_skus: Vec<SkuId> = skus
        .order
        .iter()
        .map(|&s| SkuId::new(s))
        .collect::<Result<_, _>>()?;

    let warm = Plan {
        requests: WARMUP,
        max_duration: WARMUP_MAX,
        rate_per_sec: None,
    };
    let warm_singles = workers_of(
        target,
        skus.single,
        "xrw",
        concurrency,
        UserOf::UniqueFrom(WARMUP_USERS),
    );
    let warm_orders = posters(
        target,
        &skus.order,
        &format!("{ORDER_TAG}w"),
        WARMUP_USERS,
        concurrency,
    );
    let warm_r = drive("warm-up", warm, warm_singles).await;
    let warm_o = drive("warm-up", warm, warm_orders).await;
    let mut taken_single = warm_r.tally.done as i64;
    let mut taken_orders = warm_o.tally.done as i64;
    let mut violations = Vec::new();
    if !drained(stores, &[single], total, taken_single).await
        || !drained(stores, &order_skus, total, taken_orders).await
    {
        violations.push("interleaved: the warm-up did not drain".to_string());
    }

    let round_plan = Plan {
        requests: per_round,
        max_duration: plan.max_duration,
        rate_per_sec: None,
    };
    let (mut singles, mut orders) = (Kind::default(), Kind::default());
    for round in 0..ROUNDS {
        let first = FIRST_BUYER + round * per_round;
        let label = format!("{} {}/{ROUNDS}", keys.0, round + 1);
        let workers = workers_of(
            target,
            skus.single,
            &format!("xr{round}-"),
            concurrency,
            UserOf::UniqueFrom(first),
        );
        let before = cpu::snapshot();
        let run = drive(&label, round_plan, workers).await;
        taken_single += run.tally.done as i64;
        let drain = Instant::now();
        if !drained(stores, &[single], total, taken_single).await {
            violations.push(format!("{label}: did not drain"));
        }
        singles.add(&run, before.elapsed(), drain.elapsed());

        let label = format!("{} {}/{ROUNDS}", keys.1, round + 1);
        let workers = posters(
            target,
            &skus.order,
            &format!("{ORDER_TAG}{round}-"),
            first,
            concurrency,
        );
        let before = cpu::snapshot();
        let run = drive(&label, round_plan, workers).await;
        taken_orders += run.tally.done as i64;
        let drain = Instant::now();
        if !drained(stores, &order_skus, total, taken_orders).await {
            violations.push(format!("{label}: did not drain"));
        }
        orders.add(&run, before.elapsed(), drain.elapsed());
    }

    let single_expect = Expect {
        sku: single,
        total,
        admitted: taken_single,
    };
    violations.extend(check::answers(
        single_expect,
        &both(&warm_r.tally, &singles.tally),
    ));
    violations.extend(check::stores_after_drain(&stores.db, &stores.redis, single_expect).await);
    violations.extend(super::orders::refusals(keys.1, &orders.tally));
    violations.extend(super::orders::refusals(keys.0, &singles.tally));
    let order_tally = both(&warm_o.tally, &orders.tally);
    for &sku in &order_skus {
        let expect = Expect {
            sku,
            total,
            admitted: taken_orders,
        };
        violations.extend(check::answers(expect, &order_tally));
        let bad = check::stores_after_drain(&stores.db, &stores.redis, expect).await;
        violations.extend(bad.into_iter().map(|v| format!("SKU {sku}: {v}")));
    }
    let held = u64::try_from(taken_orders)?;
    violations.extend(order_rows::after_drain(&stores.db, &order_skus, ORDER_TAG, held).await);

    let title = |what: &str| {
        format!("{what}, {ROUNDS} rounds interleaved, CPU until MySQL applied each round")
    };
    let results = vec![
        singles.result(
            keys.0,
            title("POST reservations (queue)"),
            "req/s",
            concurrency,
        ),
        orders.result(
            keys.1,
            title(&format!("POST orders of {LINES} lines")),
            "orders/s",
            concurrency,
        ),
    ];
    Ok(Checked {
        results,
        violations,
    })
}

/// Waits until MySQL holds `taken` units of each of `skus` (stock `total`).
async fn drained(stores: &check::Stores, skus: &[SkuId], total: i64, taken: i64) -> bool {
    for &sku in skus {
        if !check::wait_applied(&stores.db, sku, total - taken).await {
            return false;
        }
    }
    true
}
