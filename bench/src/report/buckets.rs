//! The stock-bucket table (issue 14): the hot-SKU phase's N = 1 and N = 3
//! variants side by side, per primary, and their two target rows. Output only:
//! the numbers are [`HotSku`] (measured in [`crate::results`]), the
//! phase is [`crate::phases::hot_sku`].

use std::fmt::Write as _;

use super::numbers::thousands;
use crate::results::{key, row, Goal, HotSku, PhaseResult, Ratio};

/// Issue 14's target: the busiest primary's Redis CPU per reservation with
/// N = 3 at most this share of the N = 1 figure (a perfect split is 1/3; the
/// rest is the headroom for leasing and uneven hashing).
pub const BUSIEST_SHARE_MAX: f64 = 0.45;
/// Issue 14's target: extra Redis round trips per reservation from leasing,
/// on average.
pub const ROUND_TRIPS_PER_RESERVATION_MAX: f64 = 0.05;

/// The two variants, when they ran: (N = 1, N = 3).
fn variants(phases: &[PhaseResult]) -> Vec<(&PhaseResult, &HotSku)> {
    phases
        .iter()
        .filter_map(|p| p.hot_sku.as_ref().map(|h| (p, h)))
        .collect()
}

fn stats<'a>(phases: &'a [PhaseResult], k: &str) -> Option<&'a HotSku> {
    phases
        .iter()
        .find(|p| p.key == k)
        .and_then(|p| p.hot_sku.as_ref())
}

/// The target rows of the hot-SKU phase (`n/a` when it did not run).
pub fn rows(phases: &[PhaseResult]) -> Vec<Ratio> {
    let one = stats(phases, key::HOT_SKU_1);
    let three = stats(phases, key::HOT_SKU_3);
    let share = one.zip(three).and_then(|(a, b)| {
        let (x, y) = (b.busiest_primary_cpu_us?, a.busiest_primary_cpu_us?);
        (y > 0.0).then(|| {
            let data = format!(
                "{} busiest {} {x:.1} µs / {} busiest {} {y:.1} µs",
                key::HOT_SKU_3,
                b.busiest_primary.as_deref().unwrap_or("?"),
                key::HOT_SKU_1,
                a.busiest_primary.as_deref().unwrap_or("?"),
            );
            (x / y, data)
        })
    });
    let trips = three.and_then(|b| {
        let per = b.round_trips_per_reservation?;
        let data = format!(
            "{} round trips / {} reservations ({})",
            thousands(b.round_trips.unwrap_or(0.0)),
            thousands(b.reservations as f64),
            key::HOT_SKU_3
        );
        Some((per, data))
    });
    vec![
        row(
            "hot SKU: busiest primary's CPU per reservation, N = 3 / N = 1",
            Goal::AtMost(BUSIEST_SHARE_MAX),
            share,
        ),
        row(
            "hot SKU: extra round trips per reservation (leasing), N = 3",
            Goal::AtMost(ROUND_TRIPS_PER_RESERVATION_MAX),
            trips,
        ),
    ]
}

/// Every primary seen by either variant, in address order.
fn primaries(rows: &[(&PhaseResult, &HotSku)]) -> Vec<String> {
    let mut all: Vec<String> = rows
        .iter()
        .flat_map(|(_, h)| h.primary_cpu_us.keys().cloned())
        .collect();
    all.sort();
    all.dedup();
    all
}

/// One row's cells: buckets, reserved, rate, p99, µs per primary, busiest, round trips.
fn cells(p: &PhaseResult, h: &HotSku, primaries: &[String]) -> Vec<String> {
    let mut out = vec![
        h.buckets.to_string(),
        thousands(h.reservations as f64),
        thousands(p.throughput),
        p.latency.map_or("-".into(), |l| format!("{:.2}", l.p99)),
    ];
    out.extend(primaries.iter().map(|a| {
        h.primary_cpu_us
            .get(a)
            .map_or("-".into(), |us| format!("{us:.1}"))
    }));
    out.push(
        h.busiest_primary_cpu_us
            .map_or("-".into(), |us| format!("{us:.1}")),
    );
    out.push(
        h.round_trips_per_reservation
            .map_or("n/a".into(), |r| format!("{r:.4}")),
    );
    out
}

fn header(primaries: &[String]) -> Vec<String> {
    let mut out: Vec<String> = ["buckets", "reserved", "reserved/s", "p99 ms"]
        .map(String::from)
        .to_vec();
    out.extend(primaries.iter().cloned());
    out.push("busiest".into());
    out.push("trips/res".into());
    out
}

/// The hot-SKU table as text (empty when the phase did not run).
pub fn text(phases: &[PhaseResult]) -> String {
    let rows = variants(phases);
    if rows.is_empty() {
        return String::new();
    }
    let primaries = primaries(&rows);
    let mut out = String::from(
        "\nHot SKU: one SKU, N buckets; Redis CPU µs per reservation of each primary\n",
    );
    let line = |first: &str, rest: &[String]| {
        let cols: Vec<String> = rest.iter().map(|c| format!("{c:>16}")).collect();
        format!("{first:<24} {}\n", cols.join(" "))
    };
    out.push_str(&line("phase", &header(&primaries)));
    for (p, h) in &rows {
        out.push_str(&line(p.key, &cells(p, h, &primaries)));
    }
    out
}

/// The hot-SKU table in Markdown (empty when the phase did not run).
pub fn markdown(phases: &[PhaseResult]) -> String {
    let rows = variants(phases);
    if rows.is_empty() {
        return String::new();
    }
    let primaries = primaries(&rows);
    let head = header(&primaries);
    let mut out = String::from(
        "\nHot SKU, one SKU split into N buckets (Redis CPU µs per reservation of each \
         primary; `trips/res` = extra Redis round trips per reservation from leasing):\n\n",
    );
    let _ = writeln!(out, "| phase | {} |", head.join(" | "));
    let _ = writeln!(out, "|---|{}", "--:|".repeat(head.len()));
    for (p, h) in &rows {
        let _ = writeln!(
            out,
            "| {} | {} |",
            p.key,
            cells(p, h, &primaries).join(" | ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn ms(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn addrs(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn phase(k: &'static str, hot: HotSku) -> PhaseResult {
        let mut p = PhaseResult::from_rate(k, String::new(), "reserved/s", 1, Default::default());
        p.hot_sku = Some(hot);
        p
    }

    #[test]
    fn the_rows_compare_the_busiest_primary_of_n3_with_n1() {
        let primaries = addrs(&["a:1", "b:2", "c:3"]);
        let one = HotSku::measure(
            1,
            &primaries,
            &ms(&[("a:1", 400.0), ("b:2", 4.0), ("c:3", 4.0)]),
            10_000,
            Some(0.0),
        );
        let three = HotSku::measure(
            3,
            &primaries,
            &ms(&[("a:1", 150.0), ("b:2", 160.0), ("c:3", 140.0)]),
            10_000,
            Some(300.0),
        );
        let phases = vec![phase(key::HOT_SKU_1, one), phase(key::HOT_SKU_3, three)];
        let rows = rows(&phases);
        assert_eq!(rows[0].value, Some(16.0 / 40.0));
        assert_eq!(rows[0].met, Some(true));
        assert!(rows[0].data.contains("b:2 16.0 µs"), "{}", rows[0].data);
        assert_eq!(rows[1].value, Some(0.03));
        assert_eq!(rows[1].met, Some(true));
        let table = text(&phases);
        assert!(table.contains("hot_sku_3"), "{table}");
        assert!(markdown(&phases).contains("| hot_sku_1 | 1 | 10,000 |"));
    }

    #[test]
    fn without_the_phase_the_rows_are_not_measured_and_no_table_is_shown() {
        let rows = rows(&[]);
        assert!(rows.iter().all(|r| r.value.is_none() && r.met.is_none()));
        assert!(text(&[]).is_empty());
        assert!(markdown(&[]).is_empty());
    }
}
