//! The expiry storm's numbers from the ledger's released rows
//! ([`crate::results::ExpiryStorm`]): two rates of the same run and
//! each release's lag from its due time, exact to the ms (`expires_at_ms` and
//! `finished_at_ms` are ms of one clock).

use crate::results::{Burst, ExpiryStorm, LatencyMs, ReleasePaths, Released};

/// The storm's numbers from its released rows; `None` without any.
pub fn of_rows(
    burst: Burst,
    rows: &[Released],
    stock_back_at_ms: Option<u64>,
    paths: ReleasePaths,
) -> Option<ExpiryStorm> {
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
    let lag_ms = super::stats::Percentiles::of_micros(&mut lags).map(|p| LatencyMs {
        p50: p.p50_ms,
        p99: p.p99_ms,
        p999: p.p999_ms,
        max: p.max_ms,
    });
    let signed = |a: u64, b: u64| a as i64 - b as i64;
    Some(ExpiryStorm {
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
        let s = of_rows(burst, &rows, Some(2_100), ReleasePaths::default()).unwrap();
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
        assert!(of_rows(burst, &[], None, ReleasePaths::default()).is_none());
    }
}
