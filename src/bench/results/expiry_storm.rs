//! The expiry storm's own numbers: a burst of reservations whose time to pay
//! ends nearly at once, and how fast the closer gives the units back. Beyond a
//! [`super::PhaseResult`] because the question is a comparison of two rates of
//! the same run (releases per second against the burst's reservations per
//! second) and a lag measured from each reservation's due time, not from a
//! request. [`ExpiryStorm::measure`] turns the ledger's timestamps into them;
//! the phase is [`crate::bench::phases::expiry_storm`].
//!
//! Why the ledger: every released row carries `expires_at_ms` (its due time)
//! and `finished_at_ms` (the time the closer decided the release, the `now` of
//! the transaction that committed it), both in ms of the same clock, so each
//! release's lag is exact to the millisecond without a poller. The end of the
//! storm as a buyer sees it — Redis' available back at the full stock — is
//! polled separately ([`ExpiryStorm::stock_back_after_last_due_ms`]).

use serde::Serialize;

use super::LatencyMs;

/// One released ledger row: its due time and its release time (Unix ms).
#[derive(Debug, Clone, Copy)]
pub struct Released {
    pub expires_at_ms: u64,
    pub finished_at_ms: u64,
}

/// What the storm measured.
#[derive(Debug, Clone, Serialize)]
pub struct ExpiryStorm {
    /// `reservation.ttl_secs` of the storm's child.
    pub ttl_secs: u64,
    /// Reservations admitted by the burst.
    pub reserved: u64,
    /// The burst's reservations per second.
    pub reservations_per_sec: f64,
    /// Rows released (status `RELEASED`, reason `EXPIRED`).
    pub released: u64,
    /// `released` over the time from the first release to the last.
    pub releases_per_sec: f64,
    /// `releases_per_sec / reservations_per_sec` (goal ≥ 1).
    pub release_to_reserve: f64,
    /// From each row's due time to its release (ledger, ms resolution).
    pub lag_ms: Option<LatencyMs>,
    /// From the first due time to the first release.
    pub first_release_after_first_due_ms: i64,
    /// From the last due time to the last release (ledger).
    pub last_release_after_last_due_ms: i64,
    /// From the last due time to Redis' available back at the full stock
    /// (polled, [`crate::bench::phases::expiry_storm`] says at what period).
    pub stock_back_after_last_due_ms: Option<i64>,
    /// Releases by the closer's delivery path (`stockd_closer_releases_total`
    /// with `path="delay_queue"`, after − before); `None` when unreadable.
    pub by_delay_queue: Option<u64>,
    /// Releases by the sweep (`path="sweep"`).
    pub by_sweep: Option<u64>,
    /// Mean reservations per closer batch (`stockd_closer_release_batch_size`).
    pub closer_batch_mean: Option<f64>,
}

/// The numbers of the burst, given before the release is measured.
#[derive(Debug, Clone, Copy)]
pub struct Burst {
    pub ttl_secs: u64,
    pub reserved: u64,
    pub reservations_per_sec: f64,
}

/// Release counters read from the child's `/metrics` (after − before).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReleasePaths {
    pub by_delay_queue: Option<u64>,
    pub by_sweep: Option<u64>,
    pub closer_batch_mean: Option<f64>,
}

impl ExpiryStorm {
    /// The storm's numbers from its released rows; `None` without any.
    pub fn measure(
        burst: Burst,
        rows: &[Released],
        stock_back_at_ms: Option<u64>,
        paths: ReleasePaths,
    ) -> Option<Self> {
        let first_due = rows.iter().map(|r| r.expires_at_ms).min()?;
        let last_due = rows.iter().map(|r| r.expires_at_ms).max()?;
        let first = rows.iter().map(|r| r.finished_at_ms).min()?;
        let last = rows.iter().map(|r| r.finished_at_ms).max()?;
        // A release decided within one ms: count it as one ms, not infinitely fast.
        let span_ms = (last - first).max(1) as f64;
        let releases_per_sec = rows.len() as f64 * 1000.0 / span_ms;
        let mut lags: Vec<u32> = (rows.iter())
            .map(|r| {
                let ms = r.finished_at_ms.saturating_sub(r.expires_at_ms);
                u32::try_from(ms.saturating_mul(1000)).unwrap_or(u32::MAX)
            })
            .collect();
        let lag_ms =
            crate::bench::measure::stats::Percentiles::of_micros(&mut lags).map(|p| LatencyMs {
                p50: p.p50_ms,
                p99: p.p99_ms,
                p999: p.p999_ms,
                max: p.max_ms,
            });
        let signed = |a: u64, b: u64| a as i64 - b as i64;
        Some(Self {
            ttl_secs: burst.ttl_secs,
            reserved: burst.reserved,
            reservations_per_sec: burst.reservations_per_sec,
            released: rows.len() as u64,
            releases_per_sec,
            release_to_reserve: if burst.reservations_per_sec > 0.0 {
                releases_per_sec / burst.reservations_per_sec
            } else {
                0.0
            },
            lag_ms,
            first_release_after_first_due_ms: signed(first, first_due),
            last_release_after_last_due_ms: signed(last, last_due),
            stock_back_after_last_due_ms: stock_back_at_ms.map(|at| signed(at, last_due)),
            by_delay_queue: paths.by_delay_queue,
            by_sweep: paths.by_sweep,
            closer_batch_mean: paths.closer_batch_mean,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(expires_at_ms: u64, finished_at_ms: u64) -> Released {
        Released {
            expires_at_ms,
            finished_at_ms,
        }
    }

    #[test]
    fn rates_and_lags_come_from_the_due_and_release_times() {
        let burst = Burst {
            ttl_secs: 10,
            reserved: 4,
            reservations_per_sec: 2.0,
        };
        // Four releases over 1 s: 4/s, twice the burst's rate.
        let rows = [
            rel(1_000, 1_000),
            rel(1_100, 1_300),
            rel(1_200, 1_600),
            rel(1_500, 2_000),
        ];
        let s = ExpiryStorm::measure(burst, &rows, Some(2_100), ReleasePaths::default()).unwrap();
        assert_eq!(s.released, 4);
        assert_eq!(s.releases_per_sec, 4.0);
        assert_eq!(s.release_to_reserve, 2.0);
        assert_eq!(s.first_release_after_first_due_ms, 0);
        assert_eq!(s.last_release_after_last_due_ms, 500);
        assert_eq!(s.stock_back_after_last_due_ms, Some(600));
        let lag = s.lag_ms.unwrap();
        assert_eq!((lag.p50, lag.max), (200.0, 500.0));
    }

    #[test]
    fn no_release_measures_nothing() {
        let burst = Burst {
            ttl_secs: 10,
            reserved: 0,
            reservations_per_sec: 0.0,
        };
        assert!(ExpiryStorm::measure(burst, &[], None, ReleasePaths::default()).is_none());
    }
}
