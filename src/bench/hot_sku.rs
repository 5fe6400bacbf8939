//! The hot-SKU phase's numbers (issue 14, stock buckets): one deep-stock SKU
//! sold with N = 1 and with N = 3 buckets on a Redis Cluster, compared by the
//! Redis CPU each primary spends per reservation and by the extra round trips
//! leasing costs. Pure computation and output; the phase itself is
//! [`super::phases::hot_sku`].
//!
//! Why the busiest primary: one hot SKU is bounded by the one core that runs
//! its scripts. Splitting it pays off exactly when that core's share of the
//! work falls, and on a machine whose primaries all share two cores the
//! per-primary split shows this where the total throughput cannot.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::phases::{key, PhaseResult};
use super::ratios::{row, Goal, Ratio};
use super::report::thousands;

/// Issue 14's target: the busiest primary's Redis CPU per reservation with
/// N = 3 at most this share of the N = 1 figure (a perfect split is 1/3; the
/// rest is the headroom for leasing and uneven hashing).
pub const BUSIEST_SHARE_MAX: f64 = 0.45;
/// Issue 14's target: extra Redis round trips per reservation from leasing,
/// on average.
pub const ROUND_TRIPS_PER_RESERVATION_MAX: f64 = 0.05;

/// What one variant of the hot-SKU phase measured beyond a [`PhaseResult`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HotSku {
    /// Buckets the SKU was split into.
    pub buckets: u16,
    /// Reservations admitted in the measured run: the divisor of every "per
    /// reservation" below.
    pub reservations: u64,
    /// Redis CPU µs per reservation of each primary, by address. Replicas are
    /// left out: they follow their primary's writes, and the per-server table
    /// of the report shows them.
    pub primary_cpu_us: BTreeMap<String, f64>,
    /// The primary that spent the most CPU per reservation.
    pub busiest_primary: Option<String>,
    /// Its Redis CPU µs per reservation.
    pub busiest_primary_cpu_us: Option<f64>,
    /// Redis calls leasing added during the run (`stockd_bucket_round_trips_total`
    /// on the api's `/metrics`, after − before); `None` when unreadable.
    pub round_trips: Option<f64>,
    /// `round_trips / reservations`.
    pub round_trips_per_reservation: Option<f64>,
}

impl HotSku {
    /// The numbers of one variant from its raw readings: `servers_ms` is the
    /// CPU milliseconds of every redis-server during the run (by the address
    /// in its process title), `primaries` the cluster's primaries (by the
    /// address `CLUSTER SLOTS` gives).
    pub fn measure(
        buckets: u16,
        primaries: &[String],
        servers_ms: &BTreeMap<String, f64>,
        reservations: u64,
        round_trips: Option<f64>,
    ) -> Self {
        let n = reservations.max(1) as f64;
        let primary_cpu_us: BTreeMap<String, f64> = primaries
            .iter()
            .filter_map(|p| Some((p.clone(), server_ms(servers_ms, p)? * 1000.0 / n)))
            .collect();
        let busiest = primary_cpu_us
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(addr, us)| (addr.clone(), *us));
        Self {
            buckets,
            reservations,
            primary_cpu_us,
            busiest_primary: busiest.as_ref().map(|b| b.0.clone()),
            busiest_primary_cpu_us: busiest.map(|b| b.1),
            round_trips,
            round_trips_per_reservation: round_trips.filter(|_| reservations > 0).map(|r| r / n),
        }
    }
}

/// A primary's CPU reading: by its exact address, else by its port when
/// exactly one redis-server listens on it (a process title says `*:7001` when
/// the server binds every address; `CLUSTER SLOTS` names the announced one).
fn server_ms(servers_ms: &BTreeMap<String, f64>, primary: &str) -> Option<f64> {
    if let Some(ms) = servers_ms.get(primary) {
        return Some(*ms);
    }
    let port = primary.rsplit_once(':')?.1;
    let mut same_port = servers_ms
        .iter()
        .filter(|(addr, _)| addr.rsplit_once(':').map(|(_, p)| p) == Some(port));
    match (same_port.next(), same_port.next()) {
        (Some((_, ms)), None) => Some(*ms),
        _ => None,
    }
}

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
    use super::*;

    fn ms(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn addrs(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn per_primary_cpu_leaves_replicas_out_and_finds_the_busiest() {
        let servers = ms(&[
            ("127.0.0.1:7001", 300.0),
            ("127.0.0.1:7002", 10.0),
            ("127.0.0.1:7003", 20.0),
            ("127.0.0.1:7004", 900.0), // a replica: not a primary
        ]);
        let primaries = addrs(&["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]);
        let h = HotSku::measure(1, &primaries, &servers, 10_000, Some(0.0));
        assert_eq!(h.primary_cpu_us.len(), 3);
        assert_eq!(h.primary_cpu_us["127.0.0.1:7001"], 30.0);
        assert_eq!(h.primary_cpu_us["127.0.0.1:7003"], 2.0);
        assert_eq!(h.busiest_primary.as_deref(), Some("127.0.0.1:7001"));
        assert_eq!(h.busiest_primary_cpu_us, Some(30.0));
        assert_eq!(h.round_trips_per_reservation, Some(0.0));
    }

    #[test]
    fn a_primary_is_found_by_its_port_when_the_title_shows_another_host() {
        let servers = ms(&[("*:7001", 50.0), ("127.0.0.1:6379", 5.0)]);
        assert_eq!(server_ms(&servers, "127.0.0.1:7001"), Some(50.0));
        assert_eq!(server_ms(&servers, "127.0.0.1:7002"), None);
        // Two servers on the same port (two hosts): no guess.
        let two = ms(&[("10.0.0.1:7001", 1.0), ("10.0.0.2:7001", 2.0)]);
        assert_eq!(server_ms(&two, "127.0.0.1:7001"), None);
    }

    #[test]
    fn round_trips_per_reservation_need_the_counter_and_reservations() {
        let none = BTreeMap::new();
        let h = HotSku::measure(3, &[], &none, 20_000, Some(500.0));
        assert_eq!(h.round_trips_per_reservation, Some(0.025));
        assert_eq!(h.busiest_primary, None);
        let h = HotSku::measure(3, &[], &none, 20_000, None);
        assert_eq!(h.round_trips_per_reservation, None);
        let h = HotSku::measure(3, &[], &none, 0, Some(5.0));
        assert_eq!(h.round_trips_per_reservation, None);
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
