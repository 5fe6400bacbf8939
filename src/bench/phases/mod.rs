//! One file per measured phase. Each returns a [`PhaseResult`] (what the table,
//! the JSON and the chart show) and the invariants it found violated.

pub mod ceiling;
pub mod console;
pub mod consumer;
pub mod hot_sku;
pub mod persist_lag;
pub mod reserve;
pub mod strawman;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::load::Run;
use super::stats::{Percentiles, Tally};

/// The phases, in the order the table lists them; the key is the JSON name.
pub mod key {
    pub const CEILING: &str = "ceiling";
    pub const RESERVE_REDIS: &str = "reserve_redis";
    pub const RESERVE_QUEUE: &str = "reserve_queue";
    /// `reserve_redis` again with generous rate limits on (their cost, not their effect).
    pub const RESERVE_REDIS_LIMITED: &str = "reserve_redis_limited";
    /// `reserve_redis` again while a console polls `/v1/admin/overview` every second.
    pub const RESERVE_REDIS_CONSOLE: &str = "reserve_redis_console";
    /// `--target`: the running stockd's durability is whatever it was started with.
    pub const RESERVE_TARGET: &str = "reserve_target";
    pub const SOLD_OUT: &str = "sold_out";
    pub const HALF_LOAD: &str = "reserve_half_load";
    pub const PERSIST_LAG: &str = "persist_lag";
    pub const HALF_LOAD_REDIS: &str = "reserve_half_load_redis";
    pub const PERSIST_LAG_REDIS: &str = "persist_lag_redis";
    pub const STRAWMAN: &str = "strawman";
    pub const STRAWMAN_1000: &str = "strawman_1000";
    /// One deep-stock SKU on a Redis Cluster, one bucket (today's layout).
    pub const HOT_SKU_1: &str = "hot_sku_1";
    /// The same load on a SKU split into three buckets on three primaries.
    pub const HOT_SKU_3: &str = "hot_sku_3";
    pub const CONSUMER_BATCHED: &str = "consumer_batched";
    pub const CONSUMER_PER_MESSAGE: &str = "consumer_per_message";
}

/// What one phase measured.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub key: &'static str,
    /// One line saying what was measured.
    pub title: String,
    /// Unit of `throughput`: `req/s`, `tx/s`, `deductions/s`.
    pub unit: &'static str,
    /// Concurrent requesters (0 when not applicable).
    pub concurrency: usize,
    /// Events measured (requests, transactions, deductions).
    pub count: u64,
    pub elapsed_ms: f64,
    pub throughput: f64,
    /// Latency (or, for persist lag, the lag) percentiles in ms.
    pub latency: Option<LatencyMs>,
    /// Answers by label (`201`, `409 SOLD_OUT`, ...).
    pub outcomes: BTreeMap<String, u64>,
    /// CPU milliseconds per process group during the phase.
    pub cpu_ms: BTreeMap<String, f64>,
    /// CPU milliseconds of each redis-server (by address): the primaries of a
    /// cluster one by one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redis_servers_ms: BTreeMap<String, f64>,
    /// When the phase started (Unix ms), to find what happened during it.
    pub started_unix_ms: u64,
    /// Redis commands on the bench's keys that blocked Redis during the phase
    /// (from SLOWLOG), slowest first.
    pub redis_stalls: Vec<crate::bench::slowlog::Stall>,
    /// Group-commit batch sizes during the measured run (HTTP phases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batches: Option<crate::bench::batches::BatchSizes>,
    /// The hot-SKU phase's split, per-primary CPU and round trips.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_sku: Option<crate::bench::hot_sku::HotSku>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

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
    /// CPU microseconds per counted event, by process group.
    pub fn cpu_us_per_event(&self) -> BTreeMap<String, f64> {
        let n = self.count.max(1) as f64;
        self.cpu_ms
            .iter()
            .map(|(k, ms)| (k.clone(), ms * 1000.0 / n))
            .collect()
    }

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
            throughput: super::stats::per_sec(count, elapsed),
            latency: None,
            outcomes: Default::default(),
            cpu_ms: Default::default(),
            redis_servers_ms: Default::default(),
            started_unix_ms: started_unix_ms(elapsed),
            redis_stalls: Vec::new(),
            batches: None,
            hot_sku: None,
        }
    }
}

/// A phase that just ended after `elapsed` started this long ago.
fn started_unix_ms(elapsed: Duration) -> u64 {
    crate::clock::unix_ms().saturating_sub(elapsed.as_millis() as u64)
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
