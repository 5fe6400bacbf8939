//! The target table, computed from one run. Ratios, not absolute
//! numbers: on a shared 2-core machine absolute rates drift from run to run,
//! ratios of phases measured side by side much less.

use serde::Serialize;

use super::phases::{key, PhaseResult};
use super::report::Memory;

/// Which way a target points.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    AtLeast(f64),
    AtMost(f64),
}

impl Goal {
    fn met(self, value: f64) -> bool {
        match self {
            Goal::AtLeast(t) => value >= t,
            Goal::AtMost(t) => value <= t,
        }
    }

    pub fn text(self) -> String {
        match self {
            Goal::AtLeast(t) => format!("≥ {t}"),
            Goal::AtMost(t) => format!("≤ {t}"),
        }
    }
}

/// One row of the target table.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub name: &'static str,
    pub goal: Goal,
    /// `None` when a phase it needs did not run (e.g. `--target`).
    pub value: Option<f64>,
    pub met: Option<bool>,
    /// The numbers behind the value, for a reader checking it.
    pub data: String,
}

pub fn row(name: &'static str, goal: Goal, value: Option<(f64, String)>) -> Ratio {
    match value {
        Some((v, data)) => Ratio {
            name,
            goal,
            value: Some(v),
            met: Some(goal.met(v)),
            data,
        },
        None => Ratio {
            name,
            goal,
            value: None,
            met: None,
            data: "not measured in this run".into(),
        },
    }
}

/// Computes every target of the issue from the phases and memory readings.
pub fn compute(phases: &[PhaseResult], memory: &[Memory]) -> Vec<Ratio> {
    let find = |k: &str| phases.iter().find(|p| p.key == k);
    let tp = |k: &str| find(k).map(|p| (p.throughput, p.unit));
    let p99 = |k: &str| find(k).and_then(|p| p.latency).map(|l| l.p99);
    let quotient = |a: &str, b: &str| {
        let (x, unit_x) = tp(a)?;
        let (y, unit_y) = tp(b)?;
        (y > 0.0).then(|| {
            let data = format!(
                "{a} {} {unit_x} / {b} {} {unit_y}",
                super::report::thousands(x),
                super::report::thousands(y)
            );
            (x / y, data)
        })
    };
    let reserve_redis = if find(key::RESERVE_REDIS).is_some() {
        key::RESERVE_REDIS
    } else {
        key::RESERVE_TARGET
    };
    let reserve_queue = if find(key::RESERVE_QUEUE).is_some() {
        key::RESERVE_QUEUE
    } else {
        key::RESERVE_TARGET
    };
    let peak = memory
        .iter()
        .max_by(|a, b| a.peak_rss_mib.total_cmp(&b.peak_rss_mib))
        .map(|m| (m.peak_rss_mib, format!("{} (pid {})", m.process, m.pid)));
    let ms = |k: &str| p99(k).map(|v| (v, format!("{k} p99 {v:.2} ms")));
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
    ];
    rows.extend(super::efficiency::rows(phases));
    rows.extend(super::hot_sku::rows(phases));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(key: &'static str, throughput: f64, p99: Option<f64>) -> PhaseResult {
        let mut p = PhaseResult::from_rate(key, String::new(), "req/s", 1, Default::default());
        p.throughput = throughput;
        p.latency = p99.map(|v| crate::bench::phases::LatencyMs {
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
}
