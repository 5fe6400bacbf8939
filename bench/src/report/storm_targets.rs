//! The expiry storm's targets (`phases::expiry_storm`): releases must keep
//! pace with the burst that took the holds (releases per second ≥ 1.0 × the
//! burst's reservations per second, both from the same run, so read as a
//! ratio) and the last unit must be back within 2 s of the last due time (the
//! delay queue hands expiries over on time; the sweep's grace is the backstop).
//! Also the report's line on which path released the storm.

use super::numbers::thousands;
use crate::results::{key, row, ExpiryStorm, Goal, PhaseResult, Ratio};

/// Releases per second over the burst's reservations per second.
pub const PACE_GOAL: f64 = 1.0;
/// Last due time → every unit back (ms).
pub const LAST_GOAL_MS: f64 = 2_000.0;

fn storm(phases: &[PhaseResult]) -> Option<&ExpiryStorm> {
    (phases.iter())
        .find(|p| p.key == key::EXPIRY_STORM)
        .and_then(|p| p.expiry_storm.as_ref())
}

/// The two target rows (`n/a` when the storm did not run).
pub fn rows(phases: &[PhaseResult]) -> Vec<Ratio> {
    let s = storm(phases);
    let pace = s.map(|s| {
        let data = format!(
            "{} releases/s / {} reservations/s ({} expiries, reservation.ttl_secs {})",
            thousands(s.releases_per_sec),
            thousands(s.reservations_per_sec),
            thousands(s.released as f64),
            s.ttl_secs
        );
        (s.release_to_reserve, data)
    });
    let last = s.map(|s| {
        // What a buyer sees: Redis back at the full stock; the ledger's last
        // release beside it.
        let back = s
            .stock_back_after_last_due_ms
            .unwrap_or(s.last_release_after_last_due_ms);
        let data = format!(
            "stock back in Redis {back} ms after the last due time (last release in the ledger \
             {} ms after it), {} expiries",
            s.last_release_after_last_due_ms,
            thousands(s.released as f64)
        );
        (back as f64, data)
    });
    vec![
        row(
            "expiry storm: releases/s / the burst's reservations/s",
            Goal::AtLeast(PACE_GOAL),
            pace,
        ),
        row(
            "expiry storm: last due time → all stock back (ms)",
            Goal::AtMost(LAST_GOAL_MS),
            last,
        ),
    ]
}

/// The report's line on the storm's release paths and lags (empty without it).
pub fn text(phases: &[PhaseResult]) -> String {
    let Some(s) = storm(phases) else {
        return String::new();
    };
    let count = |n: Option<u64>| n.map_or("?".to_string(), |n| thousands(n as f64));
    let lag = s.lag_ms.map_or("-".to_string(), |l| {
        format!(
            "p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
            l.p50, l.p99, l.max
        )
    });
    format!(
        "\nexpiry storm: {} released, {} by the delay queue and {} by the sweep, {} per closer \
         batch; due → release {lag}; first release {} ms after the first due time\n",
        thousands(s.released as f64),
        count(s.by_delay_queue),
        count(s.by_sweep),
        s.closer_batch_mean
            .map_or("?".to_string(), |m| format!("{m:.0}")),
        s.first_release_after_first_due_ms
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::ExpiryStorm;

    #[test]
    fn the_rows_judge_the_pace_and_the_end_of_the_storm() {
        // Two releases due at 1 s, released at 1 s and 2 s (2/s against a
        // burst of 4/s), the stock back in Redis at 3.5 s.
        let measured = Some(ExpiryStorm {
            ttl_secs: 10,
            reserved: 2,
            reservations_per_sec: 4.0,
            released: 2,
            releases_per_sec: 2.0,
            release_to_reserve: 0.5,
            lag_ms: None,
            first_release_after_first_due_ms: 0,
            last_release_after_last_due_ms: 1_000,
            stock_back_after_last_due_ms: Some(2_500),
            by_delay_queue: None,
            by_sweep: None,
            closer_batch_mean: None,
        });
        let mut p = PhaseResult::from_rate(
            key::EXPIRY_STORM,
            String::new(),
            "releases/s",
            2,
            Default::default(),
        );
        p.expiry_storm = measured;
        let rows = rows(&[p.clone()]);
        assert_eq!(rows[0].value, Some(0.5));
        assert_eq!(rows[0].met, Some(false));
        assert_eq!(
            rows[1].value,
            Some(2_500.0),
            "Redis' time, not the ledger's"
        );
        assert_eq!(rows[1].met, Some(false));
        assert!(text(&[p]).contains("2 released"));
        assert_eq!(super::rows(&[])[0].met, None);
    }
}
