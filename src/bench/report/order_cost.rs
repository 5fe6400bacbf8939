//! The `orders` phase's target (issue 26): a whole 3-line order may cost at
//! most twice the total CPU of one single reservation. Both sides come from
//! the same child (`reserve_queue`, then `orders` right after it), summed
//! over every process (bench, stockd, Redis, RabbitMQ, MariaDB): CPU per
//! event drifts far less than rates on this 2-core VM, and an order that
//! costs three reservations' worth would show it here first.

use std::fmt::Write as _;

use super::efficiency::total;
use crate::bench::results::{key, row, Goal, PhaseResult, Ratio};

/// The bound: CPU per 3-line order ÷ CPU per reservation.
pub const GOAL: f64 = 2.0;
/// The target row's name.
const NAME: &str = "total CPU per 3-line order / one reservation (queue)";

/// (CPU µs per order, CPU µs per reservation) when both phases ran with CPU readings.
fn measured(phases: &[PhaseResult]) -> Option<(f64, f64)> {
    let find = |k: &str| {
        phases
            .iter()
            .find(|p| p.key == k && !p.cpu_ms.is_empty() && p.count > 0)
    };
    let (order, single) = (find(key::ORDERS)?, find(key::RESERVE_QUEUE)?);
    let (x, y) = (total(order), total(single));
    (y > 0.0).then_some((x, y))
}

/// The target row (`n/a` when the phases did not run).
pub fn rows(phases: &[PhaseResult]) -> Vec<Ratio> {
    let value = measured(phases).map(|(x, y)| {
        let data = format!("orders {x:.0} µs per order / reserve_queue {y:.0} µs per reservation");
        (x / y, data)
    });
    vec![row(NAME, Goal::AtMost(GOAL), value)]
}

/// The report's one line on orders (empty when the phase did not run).
pub fn text(phases: &[PhaseResult]) -> String {
    let Some((x, y)) = measured(phases) else {
        return String::new();
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\norders: total CPU per 3-line order = {:.3} ms = {:.2} × one reservation ({:.3} ms, \
         reserve_queue) (goal ≤ {GOAL})",
        x / 1000.0,
        x / y,
        y / 1000.0
    );
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
            line.contains("= 0.180 ms = 2.25 × one reservation (0.080 ms"),
            "{line}"
        );
        assert!(line.contains("(goal ≤ 2)"), "{line}");
    }

    #[test]
    fn without_both_phases_there_is_no_row_value_and_no_line() {
        let only_orders = vec![phase(key::ORDERS, 1000, &[("stockd", 1.0)])];
        assert_eq!(rows(&only_orders)[0].value, None);
        assert!(text(&only_orders).is_empty());
        assert!(text(&[]).is_empty());
    }
}
