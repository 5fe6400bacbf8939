//! Hot SKU (issue 14, stock buckets): one deep-stock SKU on a Redis Cluster,
//! first in one bucket (today's layout: every reserve script on the one
//! primary that owns the SKU's slot), then on a fresh SKU split into three
//! buckets on three primaries, under the same open-loop load from distinct
//! buyers. What it shows: the Redis CPU each primary spends per reservation
//! (the busiest one bounds a hot SKU) and the extra round trips leasing costs.
//! The numbers are [`crate::results::HotSku`], their table
//! [`crate::report::buckets`].
//!
//! A fresh SKU per variant: a SKU's bucket count cannot change while buyer
//! state of it lives in Redis (409 `BUCKETS_LOCKED`).

use std::time::Duration;

use super::{both, Checked};
use crate::drive::api::{Reserver, UserOf, WARMUP_USERS};
use crate::drive::load::{drive, Plan};
use crate::measure::stats::{per_sec, Tally};
use crate::results::HotSku;
use crate::results::{key, PhaseResult};
use crate::stack::check::{self, Expect, Target};
use crate::stack::round_trips;
use stockd::domain::SkuId;

/// Stock of each variant's SKU: far above what a bounded phase can sell
/// (`REQUESTS_MAX` plus the warm-up), so the pool never runs low and the phase
/// measures the steady state of a deep-stock sale, not its end game.
pub const STOCK: i64 = 1_000_000_000;
/// Per-buyer limit: every request comes from a buyer of its own, so one unit
/// per buyer never refuses anybody.
const LIMIT_PER_USER: i64 = 1;
/// The variants: today's layout, then one bucket per primary of the local
/// 3-primary cluster.
pub const VARIANTS: [(&str, u16); 2] = [(key::HOT_SKU_1, 1), (key::HOT_SKU_3, 3)];
/// Primaries the split variant needs for its buckets to land on distinct ones.
pub const PRIMARIES_MIN: usize = 3;
/// Seconds of offered load per variant: with the warm-up, the drain check and
/// two variants the phase stays within a few tens of seconds.
pub const MEASURE_SECS: u64 = 6;
/// Extra time a late (overloaded) run may take before no request starts any
/// more: the phase stays bounded even when the rate is above capacity.
const OVERRUN: Duration = Duration::from_secs(2);
/// Most requests of one variant, whatever the rate.
const REQUESTS_MAX: u64 = 200_000;
/// Offered rate when neither `--hot-sku-rate` nor a reserve phase of this run
/// gives one: below what a debug build on the local cluster takes.
const RATE_DEFAULT: f64 = 1_000.0;
/// Share of the run's measured reserve throughput the phase offers: the same
/// half load as the persist-lag run, below the capacity of either variant.
const RATE_SHARE: f64 = 0.5;
/// Unmeasured requests per variant: every connection opened, the scripts
/// cached on every primary and the first leases of the buckets taken.
const WARMUP_REQUESTS: u64 = 2_000;
/// Time limit of a warm-up.
const WARMUP_MAX: Duration = Duration::from_secs(10);

/// Why the phase cannot run here (one line), or `None`.
pub fn skip_reason(is_cluster: bool, primaries: usize) -> Option<String> {
    if !is_cluster {
        return Some(
            "phase hot_sku skipped: Redis is standalone (redis.mode); it compares one SKU in \
             1 and 3 buckets on the primaries of a Redis Cluster"
                .into(),
        );
    }
    (primaries < PRIMARIES_MIN).then(|| {
        format!(
            "phase hot_sku skipped: the Redis Cluster has {primaries} primaries; 3 buckets on \
             distinct primaries need {PRIMARIES_MIN}"
        )
    })
}

/// The offered rate: `--hot-sku-rate`, else half the reserve throughput this
/// run measured, else a default a debug build keeps up with.
pub fn rate(flag: Option<f64>, measured_reserve: Option<f64>) -> f64 {
    flag.or_else(|| measured_reserve.map(|r| r * RATE_SHARE))
        .filter(|r| *r >= 1.0)
        .unwrap_or(RATE_DEFAULT)
}

/// The same bounded open-loop plan for both variants.
pub fn plan(rate_per_sec: f64) -> Plan {
    let requests = (rate_per_sec * MEASURE_SECS as f64).ceil() as u64;
    Plan {
        requests: requests.clamp(1, REQUESTS_MAX),
        max_duration: Duration::from_secs(MEASURE_SECS) + OVERRUN,
        rate_per_sec: Some(rate_per_sec),
    }
}

/// Everything both variants share.
pub struct Setup {
    /// The cluster's primaries, by address (`CLUSTER SLOTS`).
    pub primaries: Vec<String>,
    /// One fresh SKU id per variant, in [`VARIANTS`] order.
    pub skus: [u64; 2],
    pub plan: Plan,
    pub concurrency: usize,
}

/// Both variants, one after the other; stops after a variant with a violation.
pub async fn run(target: &Target<'_>, setup: &Setup) -> anyhow::Result<Checked> {
    let mut all = Checked {
        results: Vec::new(),
        violations: Vec::new(),
    };
    for ((key, buckets), sku) in VARIANTS.into_iter().zip(setup.skus) {
        let checked = variant(target, setup, key, buckets, sku).await?;
        all.results.extend(checked.results);
        all.violations.extend(checked.violations);
        if !all.violations.is_empty() {
            break;
        }
    }
    Ok(all)
}

fn workers(t: &Target<'_>, s: &Setup, sku: u64, tag: &str, users: UserOf) -> Vec<Reserver> {
    (0..s.concurrency)
        .map(|_| t.reserver(sku, tag, users))
        .collect()
}

async fn variant(
    t: &Target<'_>,
    s: &Setup,
    key: &'static str,
    buckets: u16,
    sku: u64,
) -> anyhow::Result<Checked> {
    let view = t
        .api()
        .put_split_sku(sku, STOCK, LIMIT_PER_USER, buckets)
        .await?;
    anyhow::ensure!(
        bucket_count(&view) == Some(u64::from(buckets)),
        "PUT /v1/admin/skus/{sku} with \"buckets\": {buckets} answered buckets {}: \
         this stockd does not split SKUs (stock buckets, issue 14)",
        view["buckets"]
    );
    let warm_plan = Plan {
        requests: WARMUP_REQUESTS,
        max_duration: WARMUP_MAX,
        rate_per_sec: None,
    };
    let warm_users = UserOf::UniqueFrom(WARMUP_USERS);
    let warm = drive("warm-up", warm_plan, workers(t, s, sku, "hw", warm_users)).await;
    let before = round_trips::read(t.addr).await;
    let run = drive(key, s.plan, workers(t, s, sku, "h", UserOf::Unique)).await;
    let after = round_trips::read(t.addr).await;
    let tally = both(&warm.tally, &run.tally);
    let expect = Expect {
        sku: SkuId::new(sku)?,
        total: STOCK,
        admitted: tally.done as i64,
    };
    let mut violations = check::after_phase(t, expect, &tally).await;
    violations.extend(refusals(key, &tally));
    violations.extend(bucket_view(t, sku, buckets, STOCK - expect.admitted).await);
    let rate = s.plan.rate_per_sec.unwrap_or(0.0);
    let title = format!(
        "POST reservations, one deep-stock SKU in {buckets} bucket(s), offered {rate:.0}/s"
    );
    // Per reservation, not per request: the divisor of the CPU columns is
    // what was admitted (every request, when the checks hold).
    let mut result = PhaseResult::from_run(key, title, "reserved/s", s.concurrency, &run);
    result.count = run.tally.done;
    result.throughput = per_sec(run.tally.done, run.elapsed);
    result.hot_sku = Some(HotSku::measure(
        buckets,
        &s.primaries,
        &run.redis_servers_ms,
        run.tally.done,
        round_trips::since(before, after),
    ));
    Ok(Checked::one(result, violations))
}

/// Deep stock and a buyer per request: any refusal is a bug (a bucket that
/// ran dry and did not lease, a buyer routed to the wrong bucket, ...).
fn refusals(key: &str, tally: &Tally) -> Option<String> {
    (tally.refused > 0).then(|| {
        format!(
            "{key}: {} refusals on a SKU with stock for every request and a buyer per request: {:?}",
            tally.refused, tally.by_label
        )
    })
}

/// `GET /v1/skus/{sku}` after the run: the split the SKU was created with,
/// one entry per bucket, and no unit lost between the pool and the buckets
/// (the pipeline has drained, so no lease is in flight). A fresh connection:
/// the one that created the SKU idled through the run and may be closed.
async fn bucket_view(t: &Target<'_>, sku: u64, buckets: u16, want: i64) -> Vec<String> {
    let mut api = t.api();
    let view = match api.sku_view(sku).await {
        Ok(view) => view,
        Err(err) => return vec![format!("GET /v1/skus/{sku}: {err:#}")],
    };
    bucket_view_violations(&view, sku, buckets, want)
}

/// The SKU's bucket count as its view shows it: a SKU in one bucket has no
/// split fields (its view is contract §6's); `None` when the field is malformed.
fn bucket_count(view: &serde_json::Value) -> Option<u64> {
    match view.get("buckets") {
        None => Some(1),
        Some(n) => n.as_u64(),
    }
}

fn bucket_view_violations(
    view: &serde_json::Value,
    sku: u64,
    buckets: u16,
    want: i64,
) -> Vec<String> {
    let mut bad = Vec::new();
    if buckets == 1 {
        if bucket_count(view) != Some(1) || view["available"].as_i64() != Some(want) {
            bad.push(format!(
                "GET /v1/skus/{sku}: {view}, expected one bucket and {want} available"
            ));
        }
        return bad;
    }
    if bucket_count(view) != Some(u64::from(buckets)) {
        bad.push(format!(
            "GET /v1/skus/{sku}: buckets {}, created with {buckets}",
            view["buckets"]
        ));
    }
    let stock = view["bucket_stock"].as_array().cloned().unwrap_or_default();
    if stock.len() != usize::from(buckets) {
        bad.push(format!(
            "GET /v1/skus/{sku}: {} bucket_stock entries for {buckets} buckets",
            stock.len()
        ));
    }
    let in_buckets: Option<i64> = stock.iter().map(|b| b["available"].as_i64()).sum();
    match (view["pool"].as_i64(), in_buckets) {
        (Some(pool), Some(sum)) if pool + sum == want => {}
        (pool, sum) => bad.push(format!(
            "GET /v1/skus/{sku}: pool {pool:?} + buckets {sum:?} available, expected {want} in all"
        )),
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_phase_runs_only_on_a_cluster_with_three_primaries() {
        assert!(skip_reason(false, 1).unwrap().contains("standalone"));
        assert!(skip_reason(true, 2).unwrap().contains("2 primaries"));
        assert_eq!(skip_reason(true, 3), None);
        assert_eq!(skip_reason(true, 4), None);
    }

    #[test]
    fn the_rate_is_the_flag_else_half_the_measured_reserve_rate() {
        assert_eq!(rate(Some(1_500.0), Some(10_000.0)), 1_500.0);
        assert_eq!(rate(None, Some(10_000.0)), 5_000.0);
        assert_eq!(rate(None, None), RATE_DEFAULT);
        // A reserve phase that measured nothing gives no rate.
        assert_eq!(rate(None, Some(0.0)), RATE_DEFAULT);
    }

    #[test]
    fn the_plan_is_open_loop_and_bounded_in_count_and_time() {
        let p = plan(2_000.0);
        assert_eq!(p.requests, 2_000 * MEASURE_SECS);
        assert_eq!(p.rate_per_sec, Some(2_000.0));
        assert!(p.max_duration > Duration::from_secs(MEASURE_SECS));
        assert_eq!(plan(1e9).requests, REQUESTS_MAX);
    }

    #[test]
    fn the_bucket_view_must_show_the_split_and_conserve_the_stock() {
        let good = json!({
            "buckets": 3, "pool": 900, "available": 960,
            "bucket_stock": [
                {"bucket": 0, "available": 20, "drained": false, "sold_out": false},
                {"bucket": 1, "available": 30, "drained": false, "sold_out": false},
                {"bucket": 2, "available": 10, "drained": false, "sold_out": false},
            ]
        });
        assert!(bucket_view_violations(&good, 7, 3, 960).is_empty());
        let lost = bucket_view_violations(&good, 7, 3, 961);
        assert_eq!(lost.len(), 1, "{lost:?}");
        let unsplit = json!({"available": 960});
        assert_eq!(bucket_view_violations(&unsplit, 7, 3, 960).len(), 3);
        // One bucket: contract §6's view, no split fields.
        assert!(bucket_view_violations(&unsplit, 7, 1, 960).is_empty());
        assert_eq!(bucket_view_violations(&unsplit, 7, 1, 959).len(), 1);
        assert_eq!(bucket_view_violations(&good, 7, 1, 960).len(), 1);
    }
}
