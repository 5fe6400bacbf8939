//! Which path released the expiry storm, read from the child's own
//! `/metrics` before and after: `stockd_closer_releases_total` by `path`
//! (`delay_queue`, the closer's deliveries; `sweep`, the backstop) and the
//! closer's batch sizes (`stockd_closer_release_batch_size`).
//!
//! Why: a storm released by the sweep met its bound only through the grace
//! period; the delay queue is the path that hands expiries over on time.

use std::net::SocketAddr;

use crate::results::ReleasePaths;

const RELEASES: &str = "stockd_closer_releases_total";
const BATCH: &str = "stockd_closer_release_batch_size";

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReleaseCounters {
    delay_queue: f64,
    sweep: f64,
    /// The batch-size histogram's sum and count.
    batch: (f64, f64),
}

impl ReleaseCounters {
    /// Reads the counters from the child's `/metrics` ([`super::scrape::page`]).
    pub async fn read(addr: SocketAddr) -> Option<Self> {
        Some(Self::parse(&super::scrape::page(addr).await?))
    }

    fn parse(text: &str) -> Self {
        let mut c = Self::default();
        for (name, value) in super::scrape::samples(text) {
            if name.starts_with(&format!("{RELEASES}{{")) {
                if name.contains("path=\"delay_queue\"") {
                    c.delay_queue += value;
                } else if name.contains("path=\"sweep\"") {
                    c.sweep += value;
                }
            } else if name == format!("{BATCH}_sum") {
                c.batch.0 = value;
            } else if name == format!("{BATCH}_count") {
                c.batch.1 = value;
            }
        }
        c
    }

    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Self) -> ReleasePaths {
        let count = |now: f64, then: f64| Some((now - then).max(0.0) as u64);
        let batches = self.batch.1 - before.batch.1;
        ReleasePaths {
            by_delay_queue: count(self.delay_queue, before.delay_queue),
            by_sweep: count(self.sweep, before.sweep),
            closer_batch_mean: (batches > 0.0).then(|| (self.batch.0 - before.batch.0) / batches),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_told_apart_by_path_and_batches_averaged() {
        let before = ReleaseCounters::parse("");
        let after = ReleaseCounters::parse(
            "# TYPE stockd_closer_releases_total counter\n\
             stockd_closer_releases_total{reason=\"EXPIRED\",path=\"delay_queue\"} 900\n\
             stockd_closer_releases_total{reason=\"EXPIRED\",path=\"sweep\"} 100\n\
             stockd_closer_release_batch_size{quantile=\"0.5\"} 64\n\
             stockd_closer_release_batch_size_sum 900\n\
             stockd_closer_release_batch_size_count 10\n",
        );
        let paths = after.since(&before);
        assert_eq!(paths.by_delay_queue, Some(900));
        assert_eq!(paths.by_sweep, Some(100));
        assert_eq!(paths.closer_batch_mean, Some(90.0));
    }
}
