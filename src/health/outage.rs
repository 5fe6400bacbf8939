//! The outage log: one line when a dependency goes down, one when it is back,
//! and a summary with counts in between — never one line per failed request.
//!
//! At flash-sale rates a Redis outage fails thousands of requests a second; an
//! ERROR line for each would flood the log exactly when an operator reads it.
//! Each failed request counts in `stockd_dependency_failures_total` instead.
//! State is process-wide, like the metrics registry: request handlers report
//! failures, the gauge refresher reports probe results (which end outages).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

use crate::clock::unix_ms;

/// Least time between two "still down" summaries of one dependency.
const SUMMARY_EVERY_MS: u64 = 10_000;

#[derive(Debug, Default, Clone)]
struct Outage {
    started_ms: u64,
    failures_total: u64,
    failures_since_summary: u64,
    last_summary_ms: u64,
}

static OUTAGES: LazyLock<Mutex<HashMap<&'static str, Outage>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A request (or worker step) failed because `dependency` did not answer.
pub fn failed(dependency: &'static str, err: &dyn std::fmt::Display) {
    metrics::counter!("stockd_dependency_failures_total", "dependency" => dependency).increment(1);
    let now = unix_ms();
    let mut outages = OUTAGES.lock().expect("lock poisoned");
    match outages.get_mut(dependency) {
        None => {
            outages.insert(
                dependency,
                Outage {
                    started_ms: now,
                    failures_total: 1,
                    failures_since_summary: 1,
                    last_summary_ms: now,
                },
            );
            tracing::error!(dependency, error = %err, effect = effect_of(dependency),
                "outage.start: dependency unavailable (one line per outage, counts in stockd_dependency_failures_total)");
        }
        Some(outage) => {
            outage.failures_total += 1;
            outage.failures_since_summary += 1;
            if now.saturating_sub(outage.last_summary_ms) >= SUMMARY_EVERY_MS {
                tracing::warn!(dependency, error = %err,
                    down_ms = now.saturating_sub(outage.started_ms),
                    failures = outage.failures_since_summary,
                    failures_total = outage.failures_total,
                    "outage.ongoing: dependency still unavailable");
                outage.failures_since_summary = 0;
                outage.last_summary_ms = now;
            }
        }
    }
}

/// What callers see while `dependency` is down, for the outage line.
fn effect_of(dependency: &str) -> &'static str {
    match dependency {
        // A reservation stands in the outbox; the relay publishes it later.
        "amqp" => "reservations answer 202 (durability queue) and wait in the outbox",
        // Traces only: the export queue drops, no request waits (src/otel/export.rs).
        "otlp_collector" => {
            "spans are dropped (stockd_trace_spans_dropped_total); answers are not affected"
        }
        _ => "requests that need it answer 503 + Retry-After",
    }
}

/// `dependency` answered (a probe or a request succeeded): ends its outage.
pub fn answered(dependency: &'static str) {
    let mut outages = OUTAGES.lock().expect("lock poisoned");
    if let Some(outage) = outages.remove(dependency) {
        tracing::warn!(
            dependency,
            down_ms = unix_ms().saturating_sub(outage.started_ms),
            failures_total = outage.failures_total,
            "outage.end: dependency answers again"
        );
    }
}

/// Whether an outage of `dependency` is ongoing (as far as this process saw).
pub fn is_down(dependency: &'static str) -> bool {
    OUTAGES
        .lock()
        .expect("lock poisoned")
        .contains_key(dependency)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_starts_on_the_first_failure_and_ends_when_answered() {
        let dep = "outage-test-dependency";
        assert!(!is_down(dep));
        failed(dep, &"refused");
        failed(dep, &"refused");
        assert!(is_down(dep));
        assert_eq!(OUTAGES.lock().unwrap().get(dep).unwrap().failures_total, 2);
        answered(dep);
        assert!(!is_down(dep));
    }
}
