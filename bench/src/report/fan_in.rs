//! Batch admission's target rows (issue 31): what the reserve path gives
//! next to the single-call ceiling (the reserve script called once per
//! reservation, no HTTP), in throughput at 64 and 1,000 connections and in
//! CPU per reservation. Ratios of one run, like every row of the table.

use super::efficiency::{of, total};
use super::phase_lookup::Lookup;
use crate::results::{key, row, Goal, Ratio};

/// The rows; `None` values where a phase did not run.
pub(super) fn rows(run: &Lookup<'_>) -> Vec<Ratio> {
    let with_cpu = |k: &str| run.find(k).filter(|p| !p.cpu_ms.is_empty());
    let rate = |a: &str, b: &str| run.quotient(a, b);
    let cpu = |process: Option<&str>| {
        let (q, c) = (with_cpu(key::RESERVE_QUEUE)?, with_cpu(key::CEILING)?);
        let (x, y, what) = match process {
            Some(name) => (of(q, name), of(c, name), name),
            None => (total(q), total(c), "total"),
        };
        (y > 0.0).then(|| {
            let data = format!("{what}: reserve_queue {x:.0} µs / ceiling {y:.0} µs");
            (x / y, data)
        })
    };
    vec![
        row(
            "batched ceiling / single-call ceiling (no HTTP)",
            Goal::AtLeast(1.0),
            rate(key::CEILING_BATCHED, key::CEILING),
        ),
        row(
            "reserve (queue) at 64 connections / single-call ceiling",
            Goal::AtLeast(1.0),
            rate(key::RESERVE_QUEUE, key::CEILING),
        ),
        row(
            "reserve (queue) at 1,000 connections / single-call ceiling",
            Goal::AtLeast(1.5),
            rate(key::RESERVE_FAN_IN, key::CEILING),
        ),
        row(
            "Redis CPU per reservation, reserve (queue) / single-call ceiling",
            Goal::AtMost(0.35),
            cpu(Some("redis")),
        ),
        row(
            "total CPU per reservation, reserve (queue) / single-call ceiling",
            Goal::AtMost(1.5),
            cpu(None),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::PhaseResult;

    fn phase(key: &'static str, throughput: f64, cpu: &[(&str, f64)]) -> PhaseResult {
        let mut p = PhaseResult::from_rate(key, String::new(), "req/s", 1000, Default::default());
        p.throughput = throughput;
        p.cpu_ms = cpu.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        p
    }

    #[test]
    fn the_reserve_path_is_judged_against_the_single_call_ceiling() {
        // 1,000 events each: ms per phase = µs per event.
        let phases = vec![
            phase(key::CEILING, 20_000.0, &[("redis", 60.0), ("bench", 40.0)]),
            phase(key::CEILING_BATCHED, 50_000.0, &[("redis", 15.0)]),
            phase(
                key::RESERVE_QUEUE,
                10_000.0,
                &[("redis", 15.0), ("stockd", 100.0)],
            ),
            phase(key::RESERVE_FAN_IN, 40_000.0, &[]),
        ];
        let rows = rows(&Lookup(&phases));
        let get = |n: &str| rows.iter().find(|r| r.name.starts_with(n)).unwrap();
        assert_eq!(get("batched ceiling").value, Some(2.5));
        assert_eq!(get("reserve (queue) at 64").met, Some(false));
        assert_eq!(get("reserve (queue) at 1,000").value, Some(2.0));
        assert_eq!(get("Redis CPU").value, Some(0.25));
        assert_eq!(get("Redis CPU").met, Some(true));
        assert_eq!(get("total CPU").value, Some(115.0 / 100.0));
    }

    #[test]
    fn rows_without_their_phases_are_not_measured() {
        assert!(rows(&Lookup(&[])).iter().all(|r| r.value.is_none()));
    }
}
