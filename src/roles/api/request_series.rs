//! The request metrics' series (`stockd_http_requests_total` by route,
//! status and client; `stockd_http_request_duration_seconds` by route and
//! client), bound once per label set and kept by each worker thread.
//!
//! Why: `metrics::counter!` with labels builds the series' key (a label
//! list, the status formatted, the route and client copied) and looks it up
//! in the recorder's registry on every call: about 2,000 instructions a
//! request, more than the rest of the middleware stack's own work together
//! (BENCHMARKS.md, "How to read the instruction counts"). The label sets are
//! bounded — routes by the route table (`routing.rs`), statuses by what the
//! API answers, clients by `auth.clients` — so each worker keeps their
//! handles and a request only finds its pair in a small map.
//!
//! Handles are kept only once the process's recorder is installed
//! (`telemetry::metrics_handle`): a handle taken before would count nowhere
//! for good. Until then (unit tests of a bare app) each call goes through the
//! macros, which is what a kept handle does too.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use metrics::{Counter, Histogram, SharedString};

use super::auth::ANONYMOUS;

/// One request's labels: the route pattern, the status, the client's name
/// (`None`: anonymous).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Labels {
    route: &'static str,
    status: u16,
    client: Option<Arc<str>>,
}

/// The two series a request with these labels is counted in.
struct Series {
    requests: Counter,
    duration: Histogram,
}

impl Series {
    fn bind(labels: &Labels) -> Self {
        let client = match &labels.client {
            Some(name) => SharedString::from(name.clone()),
            None => SharedString::const_str(ANONYMOUS),
        };
        let route = SharedString::const_str(labels.route);
        Self {
            requests: metrics::counter!("stockd_http_requests_total",
                "route" => route.clone(), "status" => labels.status.to_string(),
                "client" => client.clone()),
            duration: metrics::histogram!("stockd_http_request_duration_seconds",
                "route" => route, "client" => client),
        }
    }

    fn record(&self, elapsed: Duration) {
        self.requests.increment(1);
        self.duration.record(elapsed.as_secs_f64());
    }
}

thread_local! {
    /// This worker's series, by labels.
    static BOUND: RefCell<HashMap<Labels, Series>> = RefCell::new(HashMap::new());
}

/// Counts one request of `route` answered `status` for `client`, which took
/// `elapsed`.
pub fn record(route: &'static str, status: u16, client: Option<Arc<str>>, elapsed: Duration) {
    let labels = Labels {
        route,
        status,
        client,
    };
    if !crate::telemetry::recorder_installed() {
        return Series::bind(&labels).record(elapsed);
    }
    BOUND.with(|bound| {
        let mut bound = bound.borrow_mut();
        match bound.get(&labels) {
            Some(series) => series.record(elapsed),
            None => {
                let series = Series::bind(&labels);
                series.record(elapsed);
                bound.insert(labels, series);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn each_request_counts_in_its_series_once_bound() {
        let handle = crate::telemetry::metrics_handle();
        let route = "/v1/request-series/{id}";
        for _ in 0..3 {
            super::record(route, 201, None, Duration::from_millis(1));
        }
        super::record(route, 409, Some(Arc::from("orders")), Duration::ZERO);
        let text = handle.render();
        for series in [
            "stockd_http_requests_total{route=\"/v1/request-series/{id}\",status=\"201\",client=\"anonymous\"} 3",
            "stockd_http_requests_total{route=\"/v1/request-series/{id}\",status=\"409\",client=\"orders\"} 1",
            "stockd_http_request_duration_seconds_count{route=\"/v1/request-series/{id}\",client=\"anonymous\"} 3",
        ] {
            assert!(text.contains(series), "missing {series} in {text}");
        }
    }
}
