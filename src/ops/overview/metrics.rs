//! The console's numbers that this process already counts, read back from its
//! own Prometheus registry (the text `/metrics` serves): reservations by
//! result, and the persist-lag and consumer-batch histograms over a recent
//! window. Nothing here touches the reserve path: the counters are the ones
//! `routes::holds::reservation` increments anyway.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Window over which persist lag and batch size are summarized.
pub const WINDOW: Duration = Duration::from_secs(15);
/// Histogram snapshots kept (one per gather, about one a second; covers `WINDOW`).
const SNAPSHOTS_MAX: usize = 32;

const RESERVATIONS: &str = "stockd_reservations_total";
const PERSIST_LAG: &str = "stockd_persist_lag_seconds";
const BATCH_SIZE: &str = "stockd_consumer_batch_size";

/// Reservation attempts answered by this process since it started, by result.
/// The page turns successive readings into rates.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReserveCounts {
    /// Reserved (201/202).
    pub accepted: u64,
    /// Identical replays of an earlier reservation (200).
    pub replayed: u64,
    /// Sold out or fewer units left than asked for (409).
    pub sold_out: u64,
    /// The buyer's per-SKU limit (409 LIMIT_EXCEEDED).
    pub limit: u64,
    /// The buyer's attempt rate (429 from the reserve script).
    pub rate_limited: u64,
    /// Everything else: Redis errors, a full outbox, SKU not loaded or unknown,
    /// idempotency mismatches.
    pub errors: u64,
}

/// One reading of a histogram: cumulative count per upper bound, plus sum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// `(le, cumulative count)`, ascending `le`, `+Inf` last.
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
    pub count: f64,
}

impl Histogram {
    /// The `q` quantile of what was observed since `earlier` (upper bucket
    /// bound, as Prometheus' `histogram_quantile` would say it, without
    /// interpolation); `None` when nothing was observed.
    pub fn quantile_since(&self, earlier: &Histogram, q: f64) -> Option<f64> {
        let total = self.count - earlier.count;
        if total <= 0.0 {
            return None;
        }
        let rank = (q * total).ceil().max(1.0);
        for (le, cumulative) in &self.buckets {
            let before = earlier
                .buckets
                .iter()
                .find(|(l, _)| l == le)
                .map_or(0.0, |(_, c)| *c);
            if cumulative - before >= rank {
                // Past the largest finite bound: report that bound, not infinity.
                return Some(if le.is_finite() {
                    *le
                } else {
                    self.largest_finite_bound()
                });
            }
        }
        Some(self.largest_finite_bound())
    }

    /// Mean of what was observed since `earlier`.
    pub fn mean_since(&self, earlier: &Histogram) -> Option<f64> {
        let n = self.count - earlier.count;
        (n > 0.0).then(|| (self.sum - earlier.sum) / n)
    }

    fn largest_finite_bound(&self) -> f64 {
        self.buckets
            .iter()
            .map(|(le, _)| *le)
            .filter(|le| le.is_finite())
            .fold(0.0, f64::max)
    }
}

/// What one read of the registry yields.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub reservations: ReserveCounts,
    pub persist_lag: Histogram,
    pub batch_size: Histogram,
}

/// Parses the Prometheus text exposition this process renders.
pub fn read(text: &str) -> Reading {
    let mut reading = Reading::default();
    let mut lag: BTreeMap<String, f64> = BTreeMap::new();
    let mut batch: BTreeMap<String, f64> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        match name {
            RESERVATIONS => {
                add_reservation(&mut reading.reservations, label(labels, "result"), value)
            }
            n if n == format!("{PERSIST_LAG}_bucket") => {
                lag.insert(label(labels, "le").to_string(), value);
            }
            n if n == format!("{PERSIST_LAG}_sum") => reading.persist_lag.sum = value,
            n if n == format!("{PERSIST_LAG}_count") => reading.persist_lag.count = value,
            n if n == format!("{BATCH_SIZE}_bucket") => {
                batch.insert(label(labels, "le").to_string(), value);
            }
            n if n == format!("{BATCH_SIZE}_sum") => reading.batch_size.sum = value,
            n if n == format!("{BATCH_SIZE}_count") => reading.batch_size.count = value,
            _ => {}
        }
    }
    reading.persist_lag.buckets = sorted_buckets(lag);
    reading.batch_size.buckets = sorted_buckets(batch);
    reading
}

fn add_reservation(counts: &mut ReserveCounts, result: &str, value: f64) {
    let n = value.max(0.0) as u64;
    let slot = match result {
        "reserved" => &mut counts.accepted,
        "replayed" => &mut counts.replayed,
        "sold_out" | "insufficient" => &mut counts.sold_out,
        "limit_exceeded" => &mut counts.limit,
        "rate_limited" => &mut counts.rate_limited,
        _ => &mut counts.errors,
    };
    *slot += n;
}

/// The value of label `name` in `a="x",b="y"` (our label values hold no quotes).
fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    labels
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| k.trim() == name)
        .map_or("", |(_, v)| v.trim_matches('"'))
}

fn sorted_buckets(raw: BTreeMap<String, f64>) -> Vec<(f64, f64)> {
    let mut buckets: Vec<(f64, f64)> = raw
        .into_iter()
        .filter_map(|(le, c)| {
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, c))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    buckets
}

/// Recent readings, so persist lag and batch size describe the last
/// [`WINDOW`] rather than the whole life of the process.
#[derive(Debug, Default)]
pub struct History {
    readings: VecDeque<(Instant, Histogram, Histogram)>,
}

/// Persist lag p99 (ms) and mean consumer batch size over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Recent {
    pub persist_lag_p99_ms: Option<f64>,
    pub consumer_batch_size: Option<f64>,
}

impl History {
    /// Adds `reading` taken at `now` and summarizes against the oldest kept one.
    pub fn push(&mut self, now: Instant, reading: &Reading) -> Recent {
        while let Some((at, _, _)) = self.readings.front() {
            if now.duration_since(*at) > WINDOW || self.readings.len() >= SNAPSHOTS_MAX {
                self.readings.pop_front();
            } else {
                break;
            }
        }
        let empty = Histogram::default();
        let (lag_before, batch_before) = self
            .readings
            .front()
            .map_or((&empty, &empty), |(_, l, b)| (l, b));
        let recent = Recent {
            persist_lag_p99_ms: reading
                .persist_lag
                .quantile_since(lag_before, 0.99)
                .map(|s| s * 1000.0),
            consumer_batch_size: reading.batch_size.mean_since(batch_before),
        };
        self.readings
            .push_back((now, reading.persist_lag.clone(), reading.batch_size.clone()));
        recent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# TYPE stockd_reservations_total counter
stockd_reservations_total{result=\"reserved\"} 7
stockd_reservations_total{result=\"sold_out\"} 2
stockd_reservations_total{result=\"insufficient\"} 1
stockd_reservations_total{result=\"limit_exceeded\"} 3
stockd_reservations_total{result=\"rate_limited\"} 4
stockd_reservations_total{result=\"error\"} 5
stockd_reservations_total{result=\"not_loaded\"} 1
stockd_persist_lag_seconds_bucket{le=\"0.01\"} 10
stockd_persist_lag_seconds_bucket{le=\"0.1\"} 99
stockd_persist_lag_seconds_bucket{le=\"1\"} 100
stockd_persist_lag_seconds_bucket{le=\"+Inf\"} 100
stockd_persist_lag_seconds_sum 3.5
stockd_persist_lag_seconds_count 100
stockd_consumer_batch_size_bucket{le=\"+Inf\"} 4
stockd_consumer_batch_size_sum 40
stockd_consumer_batch_size_count 4
";

    #[test]
    fn reservations_are_grouped_by_what_the_operator_watches() {
        let counts = read(TEXT).reservations;
        assert_eq!(
            counts,
            ReserveCounts {
                accepted: 7,
                replayed: 0,
                sold_out: 3,
                limit: 3,
                rate_limited: 4,
                errors: 6,
            }
        );
    }

    #[test]
    fn the_p99_is_the_bucket_bound_that_covers_99_percent() {
        let reading = read(TEXT);
        let none = Histogram::default();
        assert_eq!(reading.persist_lag.quantile_since(&none, 0.99), Some(0.1));
        assert_eq!(reading.persist_lag.quantile_since(&none, 1.0), Some(1.0));
        assert_eq!(reading.batch_size.mean_since(&none), Some(10.0));
        assert_eq!(
            reading
                .persist_lag
                .quantile_since(&reading.persist_lag, 0.99),
            None
        );
    }

    #[test]
    fn the_window_only_counts_what_happened_since_its_start() {
        let mut history = History::default();
        let start = Instant::now();
        let first = read(TEXT);
        assert_eq!(history.push(start, &first).persist_lag_p99_ms, Some(100.0));
        let mut later = first.clone();
        later.persist_lag.buckets = vec![
            (0.01, 10.0),
            (0.1, 99.0),
            (1.0, 101.0),
            (f64::INFINITY, 101.0),
        ];
        later.persist_lag.count = 101.0;
        let recent = history.push(start + Duration::from_secs(1), &later);
        assert_eq!(recent.persist_lag_p99_ms, Some(1000.0));
        assert_eq!(recent.consumer_batch_size, None);
    }
}
