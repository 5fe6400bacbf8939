//! The target table, computed from one run. Ratios, not absolute
//! numbers: on a shared 2-core machine absolute rates drift from run to run,
//! ratios of phases measured side by side much less.

use super::phase_lookup::Lookup;
use crate::results::{key, row, Goal, Memory, PhaseResult, Ratio};

/// The largest peak RSS of any stockd process, with the process behind it.
fn peak_rss(memory: &[Memory]) -> Option<(f64, String)> {
    memory
        .iter()
        .max_by(|a, b| a.peak_rss_mib.total_cmp(&b.peak_rss_mib))
        .map(|m| (m.peak_rss_mib, format!("{} (pid {})", m.process, m.pid)))
}

/// Computes every target of the issue from the phases and memory readings.
pub fn compute(phases: &[PhaseResult], memory: &[Memory]) -> Vec<Ratio> {
    let run = Lookup(phases);
    let quotient = |a: &str, b: &str| run.quotient(a, b);
    let ms = |k: &str| run.p99_ms(k);
    let reserve_redis = run.or_target(key::RESERVE_REDIS);
    let reserve_queue = run.or_target(key::RESERVE_QUEUE);
    let peak = peak_rss(memory);
    let mut rows = vec![
        row(
            "reserve (durability: redis) / ceiling",
            Goal::AtLeast(0.5),
            quotient(reserve_redis, key::CEILING),
        ),
        row(
            "reserve (durability: queue) / ceiling",
            Goal::AtLeast(0.35),
            quotient(reserve_queue, key::CEILING),
        ),
        row(
            "reserve (durability: queue) / strawman at 1,000 connections",
            Goal::AtLeast(10.0),
            quotient(reserve_queue, key::STRAWMAN_1000),
        ),
        row(
            "consumer batched / per-message",
            Goal::AtLeast(20.0),
            quotient(key::CONSUMER_BATCHED, key::CONSUMER_PER_MESSAGE),
        ),
        row(
            "sold-out / reserve (durability: queue)",
            Goal::AtLeast(2.0),
            quotient(key::SOLD_OUT, reserve_queue),
        ),
        row(
            "reserve p99 latency at half load (ms)",
            Goal::AtMost(10.0),
            ms(key::HALF_LOAD),
        ),
        row(
            "persist lag p99 at half load (ms)",
            Goal::AtMost(200.0),
            ms(key::PERSIST_LAG),
        ),
        row("peak RSS per process (MiB)", Goal::AtMost(150.0), peak),
        row(
            "reserve with rate limits on / off (durability: redis)",
            Goal::AtLeast(0.95),
            quotient(key::RESERVE_REDIS_LIMITED, key::RESERVE_REDIS),
        ),
        row(
            "reserve with the console polling / without (durability: redis)",
            Goal::AtLeast(0.97),
            quotient(key::RESERVE_REDIS_CONSOLE, key::RESERVE_REDIS),
        ),
        row(
            "reserve with TLS + client tokens on / off (durability: redis)",
            Goal::AtLeast(0.9),
            run.over_bracket(
                key::RESERVE_REDIS_SECURED,
                key::RESERVE_REDIS_CONTROL,
                key::RESERVE_REDIS_CONTROL_AFTER,
            ),
        ),
        row(
            "reserve with TLS + client tokens / the first reserve_redis child (drift included)",
            Goal::AtLeast(0.9),
            quotient(key::RESERVE_REDIS_SECURED, key::RESERVE_REDIS),
        ),
        row(
            "reserve with tracing at a 1 % sample / off (durability: queue)",
            Goal::AtLeast(0.97),
            quotient(key::RESERVE_QUEUE_TRACED, key::RESERVE_QUEUE),
        ),
        row(
            "reserve with events on / off (durability: queue)",
            Goal::AtLeast(0.9),
            run.over_bracket(
                key::RESERVE_QUEUE_EVENTS_ON,
                key::RESERVE_QUEUE_EVENTS_OFF,
                key::RESERVE_QUEUE_EVENTS_OFF_AFTER,
            ),
        ),
    ];
    rows.extend(super::efficiency::rows(phases));
    rows.extend(super::fan_in::rows(&run));
    rows.extend(super::buckets::rows(phases));
    rows.extend(super::order_cost::rows(phases));
    rows.extend(super::storm_targets::rows(phases));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(key: &'static str, throughput: f64, p99: Option<f64>) -> PhaseResult {
        let mut p = PhaseResult::from_rate(key, String::new(), "req/s", 1, Default::default());
        p.throughput = throughput;
        p.latency = p99.map(|v| crate::results::LatencyMs {
            p50: v,
            p99: v,
            p999: v,
            max: v,
        });
        p
    }

    #[test]
    fn ratios_are_met_or_missed_against_their_goals() {
        let phases = vec![
            phase(key::CEILING, 40_000.0, None),
            phase(key::RESERVE_REDIS, 24_000.0, None),
            phase(key::RESERVE_QUEUE, 8_000.0, None),
            phase(key::HALF_LOAD, 4_000.0, Some(12.0)),
        ];
        let rows = compute(&phases, &[]);
        let by_name = |n: &str| rows.iter().find(|r| r.name.starts_with(n)).unwrap();
        assert_eq!(
            by_name("reserve (durability: redis) / ceiling").met,
            Some(true)
        );
        assert_eq!(
            by_name("reserve (durability: queue) / ceiling").met,
            Some(false)
        );
        assert_eq!(by_name("reserve p99").met, Some(false));
        assert_eq!(
            by_name("consumer").met,
            None,
            "phases that did not run are n/a"
        );
        assert_eq!(by_name("peak RSS").value, None);
    }

    #[test]
    fn the_console_row_compares_reserve_with_and_without_polling() {
        let phases = vec![
            phase(key::RESERVE_REDIS, 20_000.0, None),
            phase(key::RESERVE_REDIS_CONSOLE, 19_600.0, None),
        ];
        let rows = compute(&phases, &[]);
        let console = rows
            .iter()
            .find(|r| r.name.starts_with("reserve with the console"))
            .unwrap();
        assert_eq!(console.value, Some(0.98));
        assert_eq!(console.met, Some(true));
    }

    #[test]
    fn the_secured_row_divides_by_the_controls_that_bracket_it() {
        let phases = vec![
            phase(key::RESERVE_REDIS, 20_000.0, None),
            phase(key::RESERVE_REDIS_CONTROL, 16_000.0, None),
            phase(key::RESERVE_REDIS_SECURED, 15_300.0, None),
            phase(key::RESERVE_REDIS_CONTROL_AFTER, 18_000.0, None),
        ];
        let rows = compute(&phases, &[]);
        let find = |n: &str| rows.iter().find(|r| r.name.starts_with(n)).unwrap();
        let secured = find("reserve with TLS + client tokens on / off");
        assert_eq!(secured.value, Some(0.9));
        assert_eq!(secured.met, Some(true));
        let drift = find("reserve with TLS + client tokens / the first");
        assert_eq!(drift.value, Some(0.765));
        assert_eq!(drift.met, Some(false));
        let without_controls = compute(&phases[..3], &[]);
        let row = without_controls
            .iter()
            .find(|r| {
                r.name
                    .starts_with("reserve with TLS + client tokens on / off")
            })
            .unwrap();
        assert_eq!(row.value, None, "no bracket, no ratio");
    }
}
