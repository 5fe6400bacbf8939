//! The steps the one-link partition scenarios (s18, s19, s20, s22) take in
//! the same way: start with the link's host in a namespace of its own, the
//! three roles and one SKU; a replies-lost-then-both-ways cut; the load they
//! play; the bounds of every answer during the fault; and, after the heal,
//! the retries of the refused reservations with the whole-run checks.

use std::time::Duration;

use super::bounds::{self, Bound, MARGIN_MS};
use super::partition::{self, Fault, Phases, Step};
use super::{plan, Scenario};
use crate::load::{LoadPlan, LoadReport, Op};
use crate::net::Link;
use crate::stack::RedisSetup;

/// Units of the scenarios' one SKU: more than the load can take.
const STOCK: i64 = 3_000;
/// Units one buyer may hold of it.
const PER_BUYER: i64 = 3;
/// Buyers of the load, requests a second and at once.
const BUYERS: u64 = 1_500;
const RATE: u32 = 40;
const CONCURRENCY: usize = 24;
/// Load before the fault begins, ms (+ up to 1 s of seeded jitter).
pub const LEAD_MS: u64 = 3_000;

/// [`Scenario::begin_net`] with the partition settings and `hosts` in
/// namespaces of their own, every role running, SKU `sku` created.
pub async fn begin(name: &str, title: &str, hosts: &[&str], sku: u64) -> Scenario {
    let settings = partition::settings();
    let mut sc = Scenario::begin_net(name, title, &settings, RedisSetup::Standalone, hosts).await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    sc.stack.create_sku(sku, STOCK, PER_BUYER).await;
    sc
}

/// `link` cut for its replies only (what is sent arrives, no answer comes
/// back) for `replies_lost`, then both ways for `full_cut`.
pub fn replies_then_both(link: Link, replies_lost: Duration, full_cut: Duration) -> [Step; 2] {
    [
        Step {
            links: vec![link.clone().replies_only()],
            fault: Fault::Cut,
            length: replies_lost,
        },
        Step {
            links: vec![link],
            fault: Fault::Cut,
            length: full_cut,
        },
    ]
}

/// `requests` reservations over the one SKU at the partition scenarios' rate.
pub fn load_plan(tag: &str, sku: u64, requests: usize) -> LoadPlan {
    let mut p = plan(tag, &[sku], BUYERS, requests, RATE);
    p.concurrency = CONCURRENCY;
    p
}

/// Plays `plan` with `steps` after [`LEAD_MS`] (`partition::under_load`).
pub async fn play(sc: &mut Scenario, plan: LoadPlan, steps: &[Step]) -> Phases {
    let base = sc.stack.base.clone();
    partition::under_load(sc, &base, plan, LEAD_MS, steps).await
}

/// A reserve bound over the fault: within `bound_ms` + [`MARGIN_MS`], one
/// of `statuses`, `expected` seen (when given).
pub fn reserve_bound(
    bound_ms: u64,
    statuses: &'static [u16],
    expected: Option<u16>,
) -> Bound<'static> {
    Bound {
        op: Op::Reserve,
        bound_ms: bound_ms + MARGIN_MS,
        statuses,
        expected,
    }
}

/// Reserves during the fault within `reserve`; confirms and cancels (when
/// any were sent) within `lifecycle_ms` + [`MARGIN_MS`], 200/409/503; then
/// the slowest answers of each window.
pub fn judge_during(sc: &mut Scenario, phases: &Phases, reserve: &Bound, lifecycle_ms: u64) {
    let answers = &phases.report.answers;
    bounds::judge(sc, answers, &phases.during, reserve);
    for op in [Op::Confirm, Op::Cancel] {
        let bound = Bound {
            op,
            bound_ms: lifecycle_ms + MARGIN_MS,
            statuses: &[200, 409, 503],
            expected: None,
        };
        partition::judge_if_any(sc, answers, &phases.during, &bound);
    }
    bounds::print_slowest(sc, answers, &phases.windows());
}

/// After the heal: every refused reservation sent again; the whole run
/// within its bounds, sane answers, no request id taken twice. Returns the
/// retries and the whole run (load + retries).
pub async fn settle(sc: &mut Scenario, phases: &Phases) -> (LoadReport, LoadReport) {
    let base = sc.stack.base.clone();
    let retries = partition::retry_refused(sc, &base, &phases.report).await;
    let all = LoadReport::merge(&[&phases.report, &retries]);
    partition::judge_whole_run(sc, &all.answers);
    sc.expect_sane_answers(&phases.report);
    partition::expect_single_take(sc, &all.answers);
    (retries, all)
}
