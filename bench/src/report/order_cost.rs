//! The orders target (issue 26): a whole 3-line order may cost at most twice
//! the total CPU of one single reservation, summed over every process
//! (bench, stockd, Redis, RabbitMQ, MariaDB). Judged on the interleaved
//! phases (`phases::orders_interleaved`: alternating rounds of one child,
//! each counted until MySQL applied it), where the VM's drift cancels; the
//! sequential pair (`reserve_queue`, then `orders` right after it) is shown
//! beside it, and judged only when the interleaved phases did not run.

use std::fmt::Write as _;

use super::efficiency::total;
use crate::results::{key, row, Goal, PhaseResult, Ratio};

/// The bound: CPU per 3-line order ÷ CPU per reservation.
pub const GOAL: f64 = 2.0;
/// The target row's name.
const NAME: &str = "total CPU per 3-line order / one reservation (queue)";

/// The two ways the quotient is measured, the judged one first.
const PAIRS: [(&str, &str); 2] = [
    (key::ORDERS_INTERLEAVED, key::RESERVE_INTERLEAVED),
    (key::ORDERS, key::RESERVE_QUEUE),
];

/// (CPU µs per order, CPU µs per reservation, the pair's phase keys) for
/// each pair that ran with CPU readings, the judged one first.
fn measured(phases: &[PhaseResult]) -> Vec<(f64, f64, (&'static str, &'static str))> {
    let find = |k: &str| {
        phases
            .iter()
            .find(|p| p.key == k && !p.cpu_ms.is_empty() && p.count > 0)
    };
    PAIRS
        .iter()
        .filter_map(|&(o, s)| {
            let (x, y) = (total(find(o)?), total(find(s)?));
            (y > 0.0).then_some((x, y, (o, s)))
        })
        .collect()
}

/// The target row (`n/a` when the phases did not run).
pub fn rows(phases: &[PhaseResult]) -> Vec<Ratio> {
    let value = measured(phases).first().map(|&(x, y, (o, s))| {
        let data = format!("{o} {x:.0} µs per order / {s} {y:.0} µs per reservation");
        (x / y, data)
    });
    vec![row(NAME, Goal::AtMost(GOAL), value)]
}

/// The report's lines on orders (empty when no pair ran): the judged
/// quotient, then the other one for comparison.
pub fn text(phases: &[PhaseResult]) -> String {
    let mut out = String::new();
    for (i, (x, y, (o, s))) in measured(phases).into_iter().enumerate() {
        let judged = if i == 0 {
            format!("(goal ≤ {GOAL})")
        } else {
            "(not judged)".to_string()
        };
        let _ = writeln!(
            out,
            "{}orders: total CPU per 3-line order = {:.3} ms = {:.2} × one reservation ({:.3} ms), \
             {o} / {s} {judged}",
            if i == 0 { "\n" } else { "" },
            x / 1000.0,
            x / y,
            y / 1000.0
        );
    }
    out
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
    fn an_order_is_judged_against_one_reservation_of_the_same_run() {
        // 1,000 events each: ms per phase = µs per event.
        let phases = vec![
            phase(
                key::RESERVE_QUEUE,
                1000,
                &[("stockd", 50.0), ("redis", 30.0)],
            ),
            phase(key::ORDERS, 1000, &[("stockd", 120.0), ("redis", 60.0)]),
        ];
        let rows = rows(&phases);
        assert_eq!(rows[0].value, Some(180.0 / 80.0));
        assert_eq!(rows[0].met, Some(false));
        let line = text(&phases);
        assert!(
            line.contains(
                "= 0.180 ms = 2.25 × one reservation (0.080 ms), orders / reserve_queue (goal ≤ 2)"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_interleaved_pair_is_judged_when_it_ran() {
        let phases = vec![
            phase(key::RESERVE_QUEUE, 1000, &[("stockd", 100.0)]),
            phase(key::ORDERS, 1000, &[("stockd", 250.0)]),
            phase(key::RESERVE_INTERLEAVED, 1000, &[("stockd", 100.0)]),
            phase(key::ORDERS_INTERLEAVED, 1000, &[("stockd", 190.0)]),
        ];
        let rows = rows(&phases);
        assert_eq!(rows[0].value, Some(1.9));
        assert_eq!(rows[0].met, Some(true));
        let text = text(&phases);
        let lines: Vec<&str> = text.trim().lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].contains("1.90 ×") && lines[0].contains("(goal ≤ 2)"),
            "{text}"
        );
        assert!(
            lines[1].contains("2.50 ×") && lines[1].contains("(not judged)"),
            "{text}"
        );
    }

    #[test]
    fn without_both_phases_there_is_no_row_value_and_no_line() {
        let only_orders = vec![phase(key::ORDERS, 1000, &[("stockd", 1.0)])];
        assert_eq!(rows(&only_orders)[0].value, None);
        assert!(text(&only_orders).is_empty());
        assert!(text(&[]).is_empty());
    }
}
