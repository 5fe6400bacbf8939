//! The CPU-efficiency targets: CPU per reservation from the CPU table, as
//! ratios of phases of one run. Rates drift with the machine's mood (2–3×
//! from day to day here); CPU per event, summed over every process, drifts
//! far less, so these rows judge efficiency where the throughput rows cannot.

use crate::results::{key, row, Goal, PhaseResult, Ratio};

/// Total CPU µs per event of a phase, every process included.
pub(super) fn total(p: &PhaseResult) -> f64 {
    p.cpu_us_per_event().values().sum()
}

/// CPU µs per event of one process group of a phase (0 when it used none).
pub(super) fn of(p: &PhaseResult, process: &str) -> f64 {
    p.cpu_us_per_event().get(process).copied().unwrap_or(0.0)
}

/// The efficiency rows; `None` values where a phase did not run.
pub fn rows(phases: &[PhaseResult]) -> Vec<Ratio> {
    let find = |k: &str| phases.iter().find(|p| p.key == k && !p.cpu_ms.is_empty());
    let ceiling = find(key::CEILING);
    let queue = find(key::RESERVE_QUEUE);
    let half = find(key::HALF_LOAD);
    let quotient = |x: f64, y: f64, data: String| (y > 0.0).then(|| (x / y, data));
    let total_vs_ceiling = ceiling.zip(queue).and_then(|(c, q)| {
        let (x, y) = (total(q), total(c));
        quotient(x, y, format!("reserve_queue {x:.0} µs / ceiling {y:.0} µs"))
    });
    let stockd_vs_ceiling = ceiling.zip(queue).and_then(|(c, q)| {
        let (x, y) = (of(q, "stockd"), total(c));
        quotient(x, y, format!("stockd {x:.0} µs / ceiling total {y:.0} µs"))
    });
    let broker_vs_redis = queue.and_then(|q| {
        let (x, y) = (of(q, "rabbitmq"), of(q, "redis"));
        quotient(x, y, format!("rabbitmq {x:.0} µs / redis {y:.0} µs"))
    });
    let half_vs_full = queue.zip(half).and_then(|(q, h)| {
        let (x, y) = (total(h), total(q));
        quotient(
            x,
            y,
            format!("reserve_half_load {x:.0} µs / reserve_queue {y:.0} µs"),
        )
    });
    vec![
        row(
            "total CPU per reservation, reserve (queue) / ceiling",
            Goal::AtMost(3.0),
            total_vs_ceiling,
        ),
        row(
            "stockd CPU per reservation, reserve (queue) / ceiling total",
            Goal::AtMost(1.0),
            stockd_vs_ceiling,
        ),
        row(
            "RabbitMQ / Redis CPU per reservation, reserve (queue)",
            Goal::AtMost(0.4),
            broker_vs_redis,
        ),
        row(
            "total CPU per reservation, half load / full load (queue)",
            Goal::AtMost(1.3),
            half_vs_full,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(key: &'static str, count: u64, cpu: &[(&str, f64)]) -> PhaseResult {
        let mut p = PhaseResult::from_rate(key, String::new(), "req/s", count, Default::default());
        p.cpu_ms = cpu.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        p
    }

    #[test]
    fn cpu_per_event_is_compared_across_phases() {
        // 1,000 events each: ms per phase = µs per event.
        let phases = vec![
            phase(key::CEILING, 1000, &[("bench", 10.0), ("redis", 20.0)]),
            phase(
                key::RESERVE_QUEUE,
                1000,
                &[("stockd", 30.0), ("redis", 30.0), ("rabbitmq", 10.0)],
            ),
            phase(key::HALF_LOAD, 1000, &[("stockd", 100.0)]),
        ];
        let rows = rows(&phases);
        let value = |n: &str| rows.iter().find(|r| r.name.starts_with(n)).unwrap().value;
        assert_eq!(
            value("total CPU per reservation, reserve"),
            Some(70.0 / 30.0)
        );
        assert_eq!(value("stockd CPU"), Some(1.0));
        assert_eq!(value("RabbitMQ"), Some(10.0 / 30.0));
        assert_eq!(value("total CPU per reservation, half"), Some(100.0 / 70.0));
        assert!(rows.iter().all(|r| r.met.is_some()));
    }

    #[test]
    fn missing_phases_are_not_measured() {
        let rows = rows(&[]);
        assert!(rows.iter().all(|r| r.value.is_none()));
    }
}
