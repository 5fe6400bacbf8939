//! What one measured phase produced: outcome counts, latency percentiles and
//! throughput. Latencies are kept whole (every request is bounded, so at most a
//! few hundred thousand samples) and sorted once: exact percentiles, no
//! histogram bucketing error in the p999.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

/// How a request ended, for the correctness checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request did what was asked (201/202 reservation, transaction committed).
    Done,
    /// A business refusal (409 SOLD_OUT, LIMIT_EXCEEDED, ...): a correct answer.
    Refused,
    /// A 5xx, a transport error or an unexpected status: always a failure.
    Failed,
}

/// One request's result: its kind and the label it is counted under.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub kind: Kind,
    pub label: Cow<'static, str>,
}

impl Outcome {
    pub fn done(label: &'static str) -> Self {
        Self {
            kind: Kind::Done,
            label: Cow::Borrowed(label),
        }
    }

    pub fn refused(label: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: Kind::Refused,
            label: label.into(),
        }
    }

    pub fn failed(label: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind: Kind::Failed,
            label: label.into(),
        }
    }
}

/// Counts per label and per kind.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub by_label: BTreeMap<String, u64>,
    /// The labels of [`Kind::Failed`] outcomes only, for the failure report.
    pub failures: BTreeMap<String, u64>,
    pub done: u64,
    pub refused: u64,
    pub failed: u64,
}

impl Tally {
    pub fn add(&mut self, outcome: &Outcome) {
        match outcome.kind {
            Kind::Done => self.done += 1,
            Kind::Refused => self.refused += 1,
            Kind::Failed => {
                self.failed += 1;
                *self.failures.entry(outcome.label.to_string()).or_default() += 1;
            }
        }
        match self.by_label.get_mut(outcome.label.as_ref()) {
            Some(n) => *n += 1,
            None => {
                self.by_label.insert(outcome.label.to_string(), 1);
            }
        }
    }

    pub fn merge(&mut self, other: Tally) {
        self.done += other.done;
        self.refused += other.refused;
        self.failed += other.failed;
        for (label, n) in other.by_label {
            *self.by_label.entry(label).or_default() += n;
        }
        for (label, n) in other.failures {
            *self.failures.entry(label).or_default() += n;
        }
    }

    pub fn total(&self) -> u64 {
        self.done + self.refused + self.failed
    }
}

/// Percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of latencies in microseconds (sorts in place).
    pub fn of_micros(samples: &mut [u32]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let at = |q: f64| {
            let rank = (q * samples.len() as f64).ceil() as usize;
            f64::from(samples[rank.clamp(1, samples.len()) - 1]) / 1000.0
        };
        Some(Self {
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            max_ms: at(1.0),
        })
    }
}

/// A duration in whole microseconds, saturating (a sample is at most minutes).
pub fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// Events per second, guarding a zero elapsed time.
pub fn per_sec(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        0.0
    } else {
        count as f64 / secs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_pick_real_samples() {
        let mut samples: Vec<u32> = (1..=1000).map(|v| v * 1000).collect();
        samples.reverse();
        let p = Percentiles::of_micros(&mut samples).unwrap();
        assert_eq!(p.p50_ms, 500.0);
        assert_eq!(p.p99_ms, 990.0);
        assert_eq!(p.p999_ms, 999.0);
        assert_eq!(p.max_ms, 1000.0);
        assert!(Percentiles::of_micros(&mut []).is_none());
    }

    #[test]
    fn tallies_merge_by_label_and_kind() {
        let mut a = Tally::default();
        a.add(&Outcome::done("201"));
        a.add(&Outcome::refused("409 SOLD_OUT"));
        let mut b = Tally::default();
        b.add(&Outcome::failed("503 UNAVAILABLE"));
        b.add(&Outcome::refused("409 SOLD_OUT"));
        a.merge(b);
        assert_eq!((a.done, a.refused, a.failed, a.total()), (1, 2, 1, 4));
        assert_eq!(a.by_label["409 SOLD_OUT"], 2);
        assert_eq!(a.failures.keys().collect::<Vec<_>>(), ["503 UNAVAILABLE"]);
    }
}
