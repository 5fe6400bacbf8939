//! A circuit breaker for the workers (consumer, closer) in front of MySQL.
//!
//! A dependency failure is not a failure of the message being applied: while
//! MySQL is unreachable, read-only, out of connections or too slow, the worker
//! keeps the deliveries it holds (unacked, so no attempt is used and nothing is
//! dead-lettered), stops taking new ones, and probes MySQL with a doubling pause
//! until it answers; then it retries what it holds. Opening and closing are
//! each logged once, and the state is a gauge (`stockd_breaker_open`) and a
//! `/readyz?verbose` check.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::unix_ms;

/// First pause between probes while open; doubled up to [`PROBE_PAUSE_MAX`].
const PROBE_PAUSE_FIRST: Duration = Duration::from_millis(250);
/// Longest pause between probes: how late after recovery work resumes at worst.
const PROBE_PAUSE_MAX: Duration = Duration::from_secs(2);

pub struct Breaker {
    /// The dependency this breaker guards (`mysql`), a metric label.
    dependency: &'static str,
    open: AtomicBool,
    /// When it opened (unix ms), 0 while closed.
    opened_at_ms: AtomicU64,
    /// Probes that failed since start: how many times a held delivery would
    /// have been retried (and counted) had it been requeued instead. Tests
    /// wait on it rather than on a span of time.
    failed_probes: AtomicU64,
}

impl Breaker {
    pub fn new(dependency: &'static str) -> Self {
        metrics::gauge!("stockd_breaker_open", "dependency" => dependency).set(0.0);
        Self {
            dependency,
            open: AtomicBool::new(false),
            opened_at_ms: AtomicU64::new(0),
            failed_probes: AtomicU64::new(0),
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::SeqCst)
    }

    /// Probes of [`Self::wait_until_healthy`] that failed, since start.
    pub fn failed_probes(&self) -> u64 {
        self.failed_probes.load(Ordering::SeqCst)
    }

    /// Opens the breaker (idempotent); logs the first failure only.
    pub fn trip(&self, who: &str, err: &dyn std::fmt::Display) {
        if !self.open.swap(true, Ordering::SeqCst) {
            self.opened_at_ms.store(unix_ms(), Ordering::SeqCst);
            metrics::gauge!("stockd_breaker_open", "dependency" => self.dependency).set(1.0);
            metrics::counter!("stockd_breaker_trips_total", "dependency" => self.dependency)
                .increment(1);
            tracing::error!(dependency = self.dependency, worker = who, error = %err,
                "breaker.open: dependency unavailable; holding deliveries (no attempt used) until it answers");
        }
    }

    /// Closes the breaker (idempotent); logs how long it was open.
    pub fn reset(&self, who: &str) {
        if self.open.swap(false, Ordering::SeqCst) {
            let opened = self.opened_at_ms.swap(0, Ordering::SeqCst);
            metrics::gauge!("stockd_breaker_open", "dependency" => self.dependency).set(0.0);
            tracing::warn!(
                dependency = self.dependency,
                worker = who,
                outage_ms = unix_ms().saturating_sub(opened),
                "breaker.closed: dependency answers again; resuming"
            );
        }
    }

    /// Waits until `probe` succeeds, pausing with a doubling delay between
    /// tries. Returns false when cancelled first.
    pub async fn wait_until_healthy<F, Fut, E>(
        &self,
        cancel: &CancellationToken,
        mut probe: F,
    ) -> bool
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), E>>,
    {
        let mut pause = PROBE_PAUSE_FIRST;
        loop {
            if !crate::shutdown::sleep_or_cancel(pause, cancel).await {
                return false;
            }
            if probe().await.is_ok() {
                return true;
            }
            self.failed_probes.fetch_add(1, Ordering::SeqCst);
            pause = (pause * 2).min(PROBE_PAUSE_MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn waits_until_the_probe_answers_and_stops_on_cancel() {
        let breaker = Breaker::new("test");
        let cancel = CancellationToken::new();
        let mut calls = 0;
        let healthy = breaker
            .wait_until_healthy(&cancel, || {
                calls += 1;
                let ok = calls >= 3;
                async move {
                    if ok {
                        Ok(())
                    } else {
                        Err("down")
                    }
                }
            })
            .await;
        assert!(healthy);
        assert_eq!(calls, 3);
        assert_eq!(breaker.failed_probes(), 2);
        cancel.cancel();
        let healthy = breaker
            .wait_until_healthy(&cancel, || async { Err::<(), _>("down") })
            .await;
        assert!(!healthy);
    }

    #[test]
    fn trip_and_reset_flip_the_state_once() {
        let breaker = Breaker::new("test");
        assert!(!breaker.is_open());
        breaker.trip("t", &"refused");
        breaker.trip("t", &"refused");
        assert!(breaker.is_open());
        breaker.reset("t");
        assert!(!breaker.is_open());
    }
}
