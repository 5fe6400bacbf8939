//! Reserve and sold-out: `POST /v1/skus/{id}/reservations` at full speed from
//! `concurrency` keep-alive connections, one unit per request, every request
//! from its own user (limit 1), so the measured path is the admission path.
//!
//! Each phase first sends a short unmeasured warm-up (connections opened, the
//! child's lazy pools filled), then the measured run.

use std::time::Duration;

use super::{both, Checked};
use crate::drive::api::{Reserver, UserOf, WARMUP_USERS};
use crate::drive::load::{drive, Plan, Run};
use crate::measure::stats::Kind;
use crate::results::PhaseResult;
use crate::stack::batches::BatchCounters;
use crate::stack::check::{self, Expect, Target};
use stockd::domain::SkuId;

/// Unmeasured requests before a measured run: enough to open every connection
/// and reach steady state, small next to the measured run.
pub const WARMUP_REQUESTS: u64 = 2_000;
/// The buyer of a sold-out SKU's only unit: outside the measured users
/// (`1..=requests`), so none of them hits its per-user limit instead.
const FIRST_BUYER: u64 = 1 << 40;
/// Time limit of a warm-up.
const WARMUP_MAX: Duration = Duration::from_secs(10);

/// `concurrency` reservation workers against `sku`, request ids `<tag><i>`,
/// every request from a buyer of its own.
pub fn workers(target: &Target<'_>, sku: u64, tag: &str, concurrency: usize) -> Vec<Reserver> {
    workers_of(target, sku, tag, concurrency, UserOf::Unique)
}

/// `concurrency` reservation workers against `sku`, request ids `<tag><i>`,
/// buyers as `users` says.
pub(super) fn workers_of(
    target: &Target<'_>,
    sku: u64,
    tag: &str,
    concurrency: usize,
    users: UserOf,
) -> Vec<Reserver> {
    (0..concurrency)
        .map(|_| target.reserver(sku, tag, users))
        .collect()
}

async fn warm_up(target: &Target<'_>, sku: u64, concurrency: usize) -> Run {
    let plan = Plan {
        requests: WARMUP_REQUESTS,
        max_duration: WARMUP_MAX,
        rate_per_sec: None,
    };
    // Buyers of their own: the measured run's buyers 1..=requests must not
    // find their limit already used by the warm-up.
    let users = UserOf::UniqueFrom(WARMUP_USERS);
    drive(
        "warm-up",
        plan,
        workers_of(target, sku, "w", concurrency, users),
    )
    .await
}

/// Full-speed reservations against a SKU with stock for every request.
pub async fn reserve(
    target: &Target<'_>,
    key: &'static str,
    title: String,
    sku: u64,
    plan: Plan,
    concurrency: usize,
) -> anyhow::Result<Checked> {
    let total = i64::try_from(WARMUP_REQUESTS + plan.requests)?;
    target.api().put_sku(sku, total, 1).await?;
    let warm = warm_up(target, sku, concurrency).await;
    let before = BatchCounters::read(target.addr).await;
    let run = drive(key, plan, workers(target, sku, "r", concurrency)).await;
    let after = BatchCounters::read(target.addr).await;
    let expect = Expect {
        sku: SkuId::new(sku)?,
        total,
        admitted: (warm.tally.done + run.tally.done) as i64,
    };
    let violations = check::after_phase(target, expect, &both(&warm.tally, &run.tally)).await;
    let mut result = PhaseResult::from_run(key, title, "req/s", concurrency, &run);
    result.batches = before.zip(after).map(|(b, a)| a.since(&b));
    Ok(Checked::one(result, violations))
}

/// Reservations against a SKU that sold out: its one unit is taken first, so
/// the SKU reached 0 the way a real sale does (and the sold-out broadcast fired).
pub async fn sold_out(
    target: &Target<'_>,
    key: &'static str,
    sku: u64,
    plan: Plan,
    concurrency: usize,
) -> anyhow::Result<Checked> {
    let api = {
        let mut api = target.api();
        api.put_sku(sku, 1, 1).await?;
        api
    };
    let first = api.reserve_one(sku, "first", FIRST_BUYER).await;
    anyhow::ensure!(
        first.kind == Kind::Done,
        "sold-out set-up: the only unit was not reserved ({})",
        first.label
    );
    let warm = warm_up(target, sku, concurrency).await;
    let run = drive(key, plan, workers(target, sku, "s", concurrency)).await;
    let expect = Expect {
        sku: SkuId::new(sku)?,
        total: 1,
        admitted: (1 + warm.tally.done + run.tally.done) as i64,
    };
    let mut violations = check::after_phase(target, expect, &both(&warm.tally, &run.tally)).await;
    let sold_out = run.tally.by_label.get("409 SOLD_OUT").copied().unwrap_or(0);
    if sold_out != run.requests {
        violations.push(format!(
            "sold-out: {sold_out} of {} answers were 409 SOLD_OUT ({:?})",
            run.requests, run.tally.by_label
        ));
    }
    let title = "POST reservations on a sold-out SKU".to_string();
    let result = PhaseResult::from_run(key, title, "req/s", concurrency, &run);
    Ok(Checked::one(result, violations))
}
