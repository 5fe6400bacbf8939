//! The load driver: `concurrency` workers share one request counter and run
//! until the request budget or the time limit is used up, whichever comes first.
//!
//! Closed loop by default (each worker sends its next request when the previous
//! one answered: the throughput a fixed number of buyers gets). With a rate it
//! is open loop: request `i` is due at `start + i / rate`, and its latency is
//! measured from that due time, not from when a worker got round to it, so a
//! stall shows up in the percentiles instead of hiding (coordinated omission).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::drive::progress::Progress;
use crate::measure::stats::{micros, per_sec, Outcome, Percentiles, Tally};

/// One worker's request maker: holds its own connection and state.
pub trait Requester: Send + 'static {
    /// Sends request number `index` (unique across workers) and classifies the answer.
    fn call(&mut self, index: u64) -> impl Future<Output = Outcome> + Send;
}

/// The bounds of one phase.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Request budget.
    pub requests: u64,
    /// Time limit: no request starts after it.
    pub max_duration: Duration,
    /// Open-loop rate in requests per second; `None` is closed loop.
    pub rate_per_sec: Option<f64>,
}

/// What a phase measured.
#[derive(Debug, Clone)]
pub struct Run {
    pub requests: u64,
    pub elapsed: Duration,
    pub latency: Option<Percentiles>,
    pub tally: Tally,
    /// CPU milliseconds per process group during the phase (see [`crate::measure::cpu`]).
    pub cpu_ms: BTreeMap<String, f64>,
    /// CPU milliseconds of each redis-server (by address) during the phase.
    pub redis_servers_ms: BTreeMap<String, f64>,
}

impl Run {
    pub fn throughput(&self) -> f64 {
        per_sec(self.requests, self.elapsed)
    }
}

/// Runs `workers` (one per concurrent requester) under `plan`, with a progress line.
pub async fn drive<R: Requester>(label: &str, plan: Plan, workers: Vec<R>) -> Run {
    assert!(!workers.is_empty(), "a phase needs at least one worker");
    let progress = Progress::start(label, plan.requests);
    let cpu_before = crate::measure::cpu::snapshot();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + plan.max_duration;
    let tasks: Vec<_> = workers
        .into_iter()
        .map(|worker| {
            let shared = Shared {
                next: next.clone(),
                done: progress.counter(),
                plan,
                started,
                deadline,
            };
            tokio::spawn(work(worker, shared))
        })
        .collect();
    let mut samples = Vec::with_capacity(plan.requests.min(1 << 22) as usize);
    let mut tally = Tally::default();
    let mut finished = started;
    for task in tasks {
        let (mut lat, t, end) = task.await.expect("a bench worker panicked");
        samples.append(&mut lat);
        tally.merge(t);
        finished = finished.max(end);
    }
    let cpu = cpu_before.elapsed();
    progress.finish().await;
    Run {
        requests: samples.len() as u64,
        elapsed: finished - started,
        latency: Percentiles::of_micros(&mut samples),
        tally,
        cpu_ms: cpu.by_label,
        redis_servers_ms: cpu.by_redis_server,
    }
}

struct Shared {
    next: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
    plan: Plan,
    started: Instant,
    deadline: Instant,
}

async fn work<R: Requester>(mut worker: R, shared: Shared) -> (Vec<u32>, Tally, Instant) {
    let mut samples = Vec::new();
    let mut tally = Tally::default();
    let mut last = shared.started;
    loop {
        let index = shared.next.fetch_add(1, Ordering::Relaxed);
        if index >= shared.plan.requests {
            break;
        }
        let begin = match shared.plan.rate_per_sec {
            Some(rate) => {
                let due = shared.started + Duration::from_secs_f64(index as f64 / rate);
                if due >= shared.deadline {
                    break;
                }
                tokio::time::sleep_until(due).await;
                // Behind schedule (the rate is above what the target serves),
                // due times lie in the past: without this the phase would run
                // on past its time limit until every due request was sent.
                if Instant::now() >= shared.deadline {
                    break;
                }
                due
            }
            None => {
                let now = Instant::now();
                if now >= shared.deadline {
                    break;
                }
                now
            }
        };
        let outcome = worker.call(index).await;
        last = Instant::now();
        samples.push(micros(last - begin));
        tally.add(&outcome);
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
    (samples, tally, last)
}
