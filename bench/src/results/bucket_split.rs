//! The hot-SKU phase's own numbers (issue 14, stock buckets): one deep-stock
//! SKU sold with N = 1 and with N = 3 buckets on a Redis Cluster, told apart by
//! the Redis CPU each primary spends per reservation and by the extra round trips
//! leasing costs. [`HotSku::measure`] turns the raw readings into them; the phase
//! is [`crate::phases::hot_sku`], the table [`crate::report::buckets`].
//!
//! Why the busiest primary: one hot SKU is bounded by the one core that runs
//! its scripts. Splitting it pays off exactly when that core's share of the
//! work falls, and on a machine whose primaries all share two cores the
//! per-primary split shows this where the total throughput cannot.

use std::collections::BTreeMap;

use serde::Serialize;

/// What one variant of the hot-SKU phase measured beyond a [`super::PhaseResult`].
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
}
