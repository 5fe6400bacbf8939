//! Stock buckets (issue 14): one SKU's stock split over N buckets, each buyer
//! pinned to one by `bucket_of`, a pool in the home slot leasing chunks to
//! the buckets, reclaims before a sold-out. What a client and an operator
//! see: exact sales under a skewed crowd, exact limits and replays, cancels
//! that reopen, clean reconciler and audit, and N guarded while buyers live.

mod contention;
mod cuts;
mod layout;
mod load;
mod ops;
mod resplit;
mod sale;
mod split;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use stockd::ops::invariants;
use stockd::redis::buckets::bucket_of;

use crate::helpers::{series_of, TestApp};
use load::{Rng, Tally};
use sale::{assert_replays, assert_sale_exact, cancels_reopen_and_sell_again};
use split::{assert_ledger, create, reconciled_ok, wait_split_drained};

/// The sale of the issue's "Done when": N = 3, stock 3,000, limit 2, 20,000
/// requests from 5,000 buyers.
const SKU: u64 = 1;
const BUCKETS: u16 = 3;
const TOTAL_STOCK: i64 = 3_000;
const LIMIT: i64 = 2;
const REQUESTS: usize = 20_000;
/// Where most buyers route: not bucket 0, so its stock only ever arrives by
/// lease from the home slot's pool.
const HOT: u16 = 1;
/// 80 % of the 5,000 buyers route to `HOT`; the rest split over the others.
const BUYERS_PER_BUCKET: [usize; 3] = [500, 4_000, 500];
/// The cold buyers' one request each lands within the first this many: after
/// it only the hot bucket buys, so what the cold buckets leased and did not
/// sell is stranded unless reclaimed.
const EARLY_REQUESTS: usize = 2_000;
/// Requests on the wire at once (a crowd, bounded for a 2-core machine).
const IN_FLIGHT: usize = 150;
/// First buyer id of the sale (clear of the ids of the rebuy phase).
const SALE_BUYERS_FROM: u64 = 1_000_000;
const PLAN_SEED: u64 = 14;
/// Longest the 20,000 requests may take on a busy 2-core machine (debug build).
const SALE_WAIT: Duration = Duration::from_secs(600);
/// A 503 in a healthy pipeline is an incident; a few under this load are
/// tolerated (each retried with its id, so the count stays exact).
const UNAVAILABLE_MAX: usize = 5;
/// Winners per bucket whose request is sent again (replay check).
const REPLAYS_PER_BUCKET: usize = 20;
/// Reservations cancelled after the sell-out: from a cold bucket and from
/// the hot one, so buyers of the bucket without returns need a reclaim.
const CANCEL_COLD: usize = 20;
const CANCEL_HOT: usize = 10;
const CANCEL_COLD_BUCKET: u16 = 2;
const REBUY_BUYERS_FROM: u64 = 50_000_000;
/// Bound on extra Redis round trips from leasing, per request. The issue's
/// 0.05 per reservation is the deep-stock steady state, measured by the
/// bench's hot-SKU phase (0.004–0.005); this sale is all end game (the hot
/// bucket runs dry again and again while the pool halves), measured at
/// 0.03–0.05 per request. Twice that catches a refill that serves its waiters
/// one by one (0.47–0.59 before leases were sized by the waiting demand).
const ROUND_TRIPS_PER_REQUEST_MAX: f64 = 0.10;
/// Longest wait for a released unit to be visible in the SKU view.
const REOPEN_WAIT: Duration = Duration::from_secs(10);

/// 20,000 requests of 5,000 buyers, 80 % of them routed to one bucket, sell
/// exactly the 3,000 units: none oversold, none stranded in a cold bucket, no
/// buyer over 2, replays answered 200. Then 30 cancels reopen the SKU, 30 new
/// buyers spread over every bucket buy exactly those units, and once the
/// pipeline drained the reconciler says OK and the audit finds nothing.
///
/// What breaks the sale (a unit oversold or stranded, a limit, the ledger)
/// fails at once; what only degrades it (503s, round trips, a stale sold-out
/// flag, a buyer refused while units were left) is noted and reported with
/// every other such finding at the end, so one run shows them all.
#[tokio::test]
async fn a_skewed_crowd_sells_exactly_the_stock_cancels_reopen_and_all_reconciles() {
    let mut findings = Findings::default();
    let app = TestApp::spawn().await;
    create(&app, SKU, TOTAL_STOCK, LIMIT, BUCKETS).await;
    let plan = the_issues_plan();
    let meter = LEASING_METER.lock().await;
    let trips_before = round_trips(&app).await;
    let started = Instant::now();
    let answers = tokio::time::timeout(SALE_WAIT, load::run(&app, SKU, &plan, IN_FLIGHT))
        .await
        .expect("the sale finished in time");
    let sale_ms = started.elapsed().as_millis();
    // Before the retries of unavailable answers: per request of the plan.
    let trips_by = round_trips_since(&trips_before, &round_trips(&app).await);
    drop(meter);
    let trips: f64 = trips_by.values().sum();
    let tally = Tally::of(&app, SKU, &plan, &answers).await;
    let per_bucket = tally.admitted_per_bucket(&plan, BUCKETS);
    eprintln!(
        "buckets sale: {sale_ms} ms, admitted {} per bucket {per_bucket:?}, refused {:?}, \
         503 {}, leasing round trips {trips}",
        tally.admitted.len(),
        tally.refused,
        tally.unavailable.len()
    );
    assert_sale_exact(&app, &plan, &tally, &mut findings).await;
    assert!(
        trips > 0.0,
        "the hot bucket holds no stock of its own: it must have leased"
    );
    findings.note(
        trips / REQUESTS as f64 <= ROUND_TRIPS_PER_REQUEST_MAX,
        format!(
            "{trips} leasing round trips for {REQUESTS} requests ({:.3} per request; \
             bound {ROUND_TRIPS_PER_REQUEST_MAX}); by series {trips_by:?}",
            trips / REQUESTS as f64
        ),
    );
    wait_split_drained(&app, SKU, TOTAL_STOCK as u64).await;
    assert_ledger(&app, SKU, &[("RESERVED", TOTAL_STOCK)]).await;
    assert_replays(&app, &plan, &tally.admitted).await;

    cancels_reopen_and_sell_again(&app, &plan, &tally.admitted, &mut findings).await;

    let rows = TOTAL_STOCK as u64 + (CANCEL_COLD + CANCEL_HOT) as u64;
    wait_split_drained(&app, SKU, rows).await;
    let released = (CANCEL_COLD + CANCEL_HOT) as i64;
    assert_ledger(
        &app,
        SKU,
        &[("RESERVED", TOTAL_STOCK), ("RELEASED", released)],
    )
    .await;
    let line = reconciled_ok(&app, SKU).await;
    assert_eq!(line.redis_conserved, Some(true), "{line:?}");
    assert_eq!(
        (line.redis_available, line.mysql_available, line.drift),
        (Some(0), 0, 0),
        "{line:?}"
    );
    let report = invariants::run(&app.res, &[TestApp::sku(SKU)], &mut |_, _| {})
        .await
        .unwrap();
    assert!(report.ok, "audit after the sale:\n{}", report.table());
    app.cleanup().await;
    findings.assert_none();
}

/// `stockd_bucket_round_trips_total` is one counter for the whole test
/// binary: the test above holds this while it measures the counter, and a
/// test that leases heavily (`contention.rs`) holds it while it sells, so
/// neither's leases count in the other's figure.
pub static LEASING_METER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What a test notes instead of failing at once (see the test above).
#[derive(Debug, Default)]
pub struct Findings(Vec<String>);

impl Findings {
    pub fn note(&mut self, ok: bool, what: String) {
        if !ok {
            eprintln!("finding: {what}");
            self.0.push(what);
        }
    }

    pub fn assert_none(&self) {
        assert!(
            self.0.is_empty(),
            "{} findings:\n- {}",
            self.0.len(),
            self.0.join("\n- ")
        );
    }
}
/// `stockd_bucket_round_trips_total` on /metrics, per series (label set);
/// none before the first round trip.
async fn round_trips(app: &TestApp) -> BTreeMap<String, f64> {
    series_of(&app.metrics_text().await, "stockd_bucket_round_trips_total")
}

/// Round trips per series from `before` to `after`.
fn round_trips_since(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    let since = |(series, n): (&String, &f64)| {
        let was = before.get(series).copied().unwrap_or(0.0);
        (series.clone(), n - was)
    };
    after.iter().map(since).collect()
}

/// The issue's sale: `REQUESTS` requests of the `BUYERS_PER_BUCKET` buyers,
/// skewed to `HOT`, the cold ones within the first `EARLY_REQUESTS`.
fn the_issues_plan() -> Vec<load::Req> {
    let buyers = load::pick_buyers(SALE_BUYERS_FROM, BUCKETS, &BUYERS_PER_BUCKET);
    let mut rng = Rng::new(PLAN_SEED);
    load::skewed_plan(&mut rng, &buyers, HOT, REQUESTS, EARLY_REQUESTS)
}

#[test]
fn the_plan_is_skewed_and_sized_as_the_issue_says() {
    let plan = the_issues_plan();
    assert_eq!(plan.len(), REQUESTS);
    let mut users: HashMap<u64, usize> = HashMap::new();
    for req in &plan {
        assert_eq!(bucket_of(req.user, BUCKETS), req.bucket);
        *users.entry(req.user).or_default() += 1;
    }
    assert_eq!(users.len(), BUYERS_PER_BUCKET.iter().sum::<usize>());
    let hot = users
        .keys()
        .filter(|&&u| bucket_of(u, BUCKETS) == HOT)
        .count();
    assert_eq!(hot * 5, users.len() * 4, "80 % of buyers in one bucket");
    assert!(users.values().any(|&n| n > 2), "some buyers send several");
    let late_cold = plan[EARLY_REQUESTS..]
        .iter()
        .filter(|r| r.bucket != HOT)
        .count();
    assert_eq!(late_cold, 0, "cold buyers only early");
    let mut rids: Vec<&str> = plan.iter().map(|r| r.rid.as_str()).collect();
    rids.sort_unstable();
    rids.dedup();
    assert_eq!(rids.len(), REQUESTS, "unique request ids");
}
