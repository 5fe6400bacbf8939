//! Group-commit batch sizes a phase actually achieved, read from the child's
//! own `/metrics` before and after the measured run: deductions per broker
//! message (`stockd_publish_batch_size`), per consumer transaction
//! (`stockd_consumer_batch_size`) and per reserve script call
//! (`stockd_reserve_batch_size`, batch admission).
//!
//! Why: the broker's CPU per reservation is its cost per message divided by
//! the deductions each message carries, so this number explains the RabbitMQ
//! column of the CPU table better than any other.

use std::net::SocketAddr;

use crate::results::BatchSizes;

const PUBLISH: &str = "stockd_publish_batch_size";
const CONSUMER: &str = "stockd_consumer_batch_size";
const RESERVE: &str = "stockd_reserve_batch_size";

/// Sums and counts of the three histograms at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchCounters {
    publish: (f64, f64),
    consumer: (f64, f64),
    reserve: (f64, f64),
}

impl BatchCounters {
    /// Reads the counters from the child's `/metrics` ([`super::scrape::page`]).
    pub async fn read(addr: SocketAddr) -> Option<Self> {
        Some(Self::parse(&super::scrape::page(addr).await?))
    }

    fn parse(text: &str) -> Self {
        let mut c = Self::default();
        for (name, value) in super::scrape::samples(text) {
            match name {
                n if n == format!("{PUBLISH}_sum") => c.publish.0 = value,
                n if n == format!("{PUBLISH}_count") => c.publish.1 = value,
                n if n == format!("{CONSUMER}_sum") => c.consumer.0 = value,
                n if n == format!("{CONSUMER}_count") => c.consumer.1 = value,
                n if n == format!("{RESERVE}_sum") => c.reserve.0 = value,
                n if n == format!("{RESERVE}_count") => c.reserve.1 = value,
                _ => {}
            }
        }
        c
    }

    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Self) -> BatchSizes {
        let mean = |now: (f64, f64), then: (f64, f64)| {
            let n = now.1 - then.1;
            (n > 0.0).then(|| (now.0 - then.0) / n)
        };
        BatchSizes {
            per_message: mean(self.publish, before.publish),
            messages: (self.publish.1 - before.publish.1).max(0.0) as u64,
            per_transaction: mean(self.consumer, before.consumer),
            per_reserve_call: mean(self.reserve, before.reserve),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_come_from_the_difference_of_two_readings() {
        let before = BatchCounters::parse(
            "# TYPE stockd_publish_batch_size summary\nstockd_publish_batch_size_sum 100\n\
             stockd_publish_batch_size_count 10\nstockd_consumer_batch_size_sum 100\n\
             stockd_consumer_batch_size_count 1\n",
        );
        let after = BatchCounters::parse(
            "stockd_publish_batch_size{quantile=\"0.5\"} 7\nstockd_publish_batch_size_sum 1100\n\
             stockd_publish_batch_size_count 110\nstockd_consumer_batch_size_sum 100\n\
             stockd_consumer_batch_size_count 1\nstockd_reserve_batch_size_sum 500\n\
             stockd_reserve_batch_size_count 100\n",
        );
        assert_eq!(
            after.since(&before),
            BatchSizes {
                per_message: Some(10.0),
                messages: 100,
                per_transaction: None,
                per_reserve_call: Some(5.0),
            }
        );
    }
}
