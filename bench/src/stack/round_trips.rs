//! Extra Redis round trips that stock buckets cost, read from the api's own
//! `/metrics` before and after a measured run: `stockd_bucket_round_trips_total`
//! counts every Redis call leasing adds (lease, credit, settle, give, drain and
//! the retried reserve). Divided by the reservations of the run it is the
//! price of splitting a SKU in round trips, which the issue bounds at 0.05.

use std::net::SocketAddr;

/// The counter's name as Prometheus text shows it.
const ROUND_TRIPS: &str = "stockd_bucket_round_trips_total";

/// Reads the counter from the child's `/metrics` ([`super::scrape::page`]).
pub async fn read(addr: SocketAddr) -> Option<f64> {
    read_counter(addr, ROUND_TRIPS, "").await
}

/// A counter of the child's `/metrics`, summed over its series whose labels
/// contain `label` (`""`: all); `None` when `/metrics` is not served there.
pub async fn read_counter(addr: SocketAddr, counter: &str, label: &str) -> Option<f64> {
    Some(counter_sum(
        &super::scrape::page(addr).await?,
        counter,
        label,
    ))
}

/// The counter's value, summed over its labels (one series per operation or
/// per SKU, whichever the api exports). A counter never touched yet is not
/// rendered at all by the exporter: that reads as 0, which it is.
fn counter_sum(text: &str, counter: &str, label: &str) -> f64 {
    super::scrape::samples(text)
        .filter(|(series, _)| {
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            name == counter && labels.contains(label)
        })
        .map(|(_, value)| value)
        .sum()
}

/// Round trips between two readings; `None` when either is missing.
pub fn since(before: Option<f64>, after: Option<f64>) -> Option<f64> {
    let (b, a) = (before?, after?);
    Some((a - b).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_labelled_series_of_the_counter_is_summed() {
        let text = "# HELP stockd_bucket_round_trips_total extra calls\n\
                    # TYPE stockd_bucket_round_trips_total counter\n\
                    stockd_bucket_round_trips_total{op=\"lease\"} 12\n\
                    stockd_bucket_round_trips_total{op=\"credit\"} 12\n\
                    stockd_bucket_round_trips_total_other 99\n\
                    stockd_bucket_round_trips 98\n\
                    stockd_publish_batch_size_sum 100\n";
        assert_eq!(counter_sum(text, ROUND_TRIPS, ""), 24.0);
        assert_eq!(counter_sum(text, ROUND_TRIPS, "op=\"lease\""), 12.0);
    }

    #[test]
    fn an_unlabelled_counter_and_an_absent_one_are_read() {
        assert_eq!(
            counter_sum("stockd_bucket_round_trips_total 7\n", ROUND_TRIPS, ""),
            7.0
        );
        assert_eq!(
            counter_sum("stockd_http_requests_total 7\n", ROUND_TRIPS, ""),
            0.0
        );
    }

    #[test]
    fn the_delta_needs_both_readings() {
        assert_eq!(since(Some(10.0), Some(25.0)), Some(15.0));
        assert_eq!(since(None, Some(25.0)), None);
        assert_eq!(since(Some(10.0), None), None);
        // A restarted target resets its counters: never a negative count.
        assert_eq!(since(Some(10.0), Some(3.0)), Some(0.0));
    }
}
