//! One file per measured phase. Each returns a [`PhaseResult`] (what the table,
//! the JSON and the chart show; the type lives in [`crate::results`]) and
//! the invariants it found violated. This module turns the driver's [`Run`]s
//! into results.

pub mod ceiling;
pub mod console;
pub mod consumer;
pub mod drop;
pub mod expiry_storm;
pub mod hot_sku;
pub mod orders;
pub mod orders_interleaved;
pub mod persist_lag;
pub mod reserve;
pub mod strawman;

use std::time::Duration;

use crate::drive::load::Run;
use crate::measure::stats::{Percentiles, Tally};
use crate::results::{LatencyMs, PhaseResult};

impl From<Percentiles> for LatencyMs {
    fn from(p: Percentiles) -> Self {
        Self {
            p50: p.p50_ms,
            p99: p.p99_ms,
            p999: p.p999_ms,
            max: p.max_ms,
        }
    }
}

impl PhaseResult {
    /// A result from a driven phase.
    pub fn from_run(
        key: &'static str,
        title: String,
        unit: &'static str,
        concurrency: usize,
        run: &Run,
    ) -> Self {
        Self {
            key,
            title,
            unit,
            concurrency,
            count: run.requests,
            elapsed_ms: ms(run.elapsed),
            throughput: run.throughput(),
            latency: run.latency.map(LatencyMs::from),
            outcomes: run.tally.by_label.clone(),
            cpu_ms: run.cpu_ms.clone(),
            redis_servers_ms: run.redis_servers_ms.clone(),
            started_unix_ms: started_unix_ms(run.elapsed),
            redis_stalls: Vec::new(),
            batches: None,
            hot_sku: None,
            expiry_storm: None,
            drop: None,
        }
    }

    /// A result measured by a rate only (the consumer drains).
    pub fn from_rate(
        key: &'static str,
        title: String,
        unit: &'static str,
        count: u64,
        elapsed: Duration,
    ) -> Self {
        Self {
            key,
            title,
            unit,
            concurrency: 0,
            count,
            elapsed_ms: ms(elapsed),
            throughput: crate::measure::stats::per_sec(count, elapsed),
            latency: None,
            outcomes: Default::default(),
            cpu_ms: Default::default(),
            redis_servers_ms: Default::default(),
            started_unix_ms: started_unix_ms(elapsed),
            redis_stalls: Vec::new(),
            batches: None,
            hot_sku: None,
            expiry_storm: None,
            drop: None,
        }
    }
}

/// A phase that just ended after `elapsed` started this long ago.
fn started_unix_ms(elapsed: Duration) -> u64 {
    stockd::clock::unix_ms().saturating_sub(elapsed.as_millis() as u64)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A phase's result plus the invariants it found violated (empty = green).
pub struct Checked {
    pub results: Vec<PhaseResult>,
    pub violations: Vec<String>,
}

impl Checked {
    pub fn one(result: PhaseResult, violations: Vec<String>) -> Self {
        Self {
            results: vec![result],
            violations,
        }
    }
}

/// Merges tallies of a warm-up and a measured run for the answer checks.
pub fn both(a: &Tally, b: &Tally) -> Tally {
    let mut all = a.clone();
    all.merge(b.clone());
    all
}
