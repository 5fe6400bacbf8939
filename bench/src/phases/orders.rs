//! Orders (issue 26): `POST /v1/orders` at full speed from `concurrency`
//! keep-alive connections, every order three lines of one unit over the same
//! three hot SKUs, every order from a buyer of its own. What it answers: the
//! CPU one whole 3-line order costs next to one single reservation (the
//! `reserve_queue` phase of the same child, the same buyers-of-their-own
//! load), whose quotient is the goal (`report::order_cost`).
//!
//! On a standalone Redis an order is one script call; on a Redis Cluster
//! (the bench run with `scripts/services.sh cluster env`) its lines are held
//! one call each under an intent (`ops/order_saga.rs`), and the phase
//! measures that.

use std::time::Duration;

use anyhow::Context;

use super::{both, Checked};
use crate::drive::api::WARMUP_USERS;
use crate::drive::load::{drive, Plan};
use crate::drive::order_poster::OrderPoster;
use crate::measure::stats::{per_sec, Tally};
use crate::results::PhaseResult;
use crate::stack::batches::BatchCounters;
use crate::stack::check::{self, Expect, Target};
use crate::stack::order_rows;
use stockd::domain::SkuId;

/// Lines per order: one per hot SKU.
pub const LINES: usize = 3;
/// Per-buyer limit of each SKU: a buyer per order, one unit of each SKU.
const LIMIT_PER_USER: i64 = 1;
/// Order ids of this phase start with this (the interleaved phase's with
/// `x`): the order-row check counts this phase's orders alone.
const ORDER_TAG: &str = "o";
/// Unmeasured orders first (connections opened, the order script cached).
const WARMUP_ORDERS: u64 = 2_000;
/// Time limit of the warm-up.
const WARMUP_MAX: Duration = Duration::from_secs(10);

/// `n` order workers over `skus`, order ids `<tag><i>` from buyer `users + i`.
pub(super) fn posters(
    t: &Target<'_>,
    skus: &[u64],
    tag: &str,
    users: u64,
    n: usize,
) -> Vec<OrderPoster> {
    (0..n)
        .map(|_| OrderPoster::new(t.addr, skus, tag, users).with_client_token(t.client_token))
        .collect()
}

/// Full-speed orders over `skus`, each with stock for every order sent
/// (warm-up included), against a child stockd whose stores the checks read.
pub async fn run(
    target: &Target<'_>,
    key: &'static str,
    skus: [u64; LINES],
    plan: Plan,
    concurrency: usize,
) -> anyhow::Result<Checked> {
    let stores = target
        .stores
        .context("the orders phase checks the stores directly: a child stockd only")?;
    let total = i64::try_from(WARMUP_ORDERS + plan.requests)?;
    let mut api = target.api();
    for sku in skus {
        api.put_sku(sku, total, LIMIT_PER_USER).await?;
    }
    let warm_plan = Plan {
        requests: WARMUP_ORDERS,
        max_duration: WARMUP_MAX,
        rate_per_sec: None,
    };
    let warm_workers = posters(
        target,
        &skus,
        &format!("{ORDER_TAG}w"),
        WARMUP_USERS,
        concurrency,
    );
    let warm = drive("warm-up", warm_plan, warm_workers).await;
    let before = BatchCounters::read(target.addr).await;
    let run = drive(key, plan, posters(target, &skus, ORDER_TAG, 1, concurrency)).await;
    let after = BatchCounters::read(target.addr).await;
    let tally = both(&warm.tally, &run.tally);
    let held = tally.done;
    let ids = skus.map(SkuId::new);
    let ids: Vec<SkuId> = ids.into_iter().collect::<Result<_, _>>()?;
    let expect = |sku| Expect {
        sku,
        total,
        admitted: held as i64,
    };
    let mut violations = check::answers(expect(ids[0]), &tally);
    violations.extend(refusals(key, &tally));
    for &sku in &ids {
        let bad = check::stores_after_drain(&stores.db, &stores.redis, expect(sku)).await;
        violations.extend(bad.into_iter().map(|v| format!("SKU {sku}: {v}")));
    }
    violations.extend(order_rows::after_drain(&stores.db, &ids, ORDER_TAG, held).await);
    let title = format!(
        "POST orders of {LINES} lines (1 unit each of the same {LINES} SKUs), durability: queue"
    );
    // Per order held: the divisor of the CPU columns (every order, when the
    // checks hold).
    let mut result = PhaseResult::from_run(key, title, "orders/s", concurrency, &run);
    result.count = run.tally.done;
    result.throughput = per_sec(run.tally.done, run.elapsed);
    result.batches = before.zip(after).map(|(b, a)| a.since(&b));
    Ok(Checked::one(result, violations))
}

/// Stock for every order and a buyer per order: any refusal is a bug.
pub(super) fn refusals(key: &str, tally: &Tally) -> Option<String> {
    (tally.refused > 0).then(|| {
        format!(
            "{key}: {} refusals with stock for every order and a buyer per order: {:?}",
            tally.refused, tally.by_label
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::Outcome;

    #[test]
    fn any_refused_order_is_a_violation() {
        let mut tally = Tally::default();
        tally.add(&Outcome::done("201"));
        assert_eq!(refusals("orders", &tally), None);
        tally.add(&Outcome::refused("409 LIMIT_EXCEEDED"));
        assert!(refusals("orders", &tally).unwrap().contains("1 refusals"));
    }
}
