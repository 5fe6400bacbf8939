//! The phases of one run looked up by key, and the quotients the target
//! rows are made of: shared by the target table (`ratios`) and the rows it
//! gathers from other files (`fan_in`), which need it and not each other.

use super::numbers::thousands;
use crate::results::{key, PhaseResult};

/// The phases of one run, looked up by key.
pub(super) struct Lookup<'a>(pub(super) &'a [PhaseResult]);

impl Lookup<'_> {
    pub(super) fn find(&self, k: &str) -> Option<&PhaseResult> {
        self.0.iter().find(|p| p.key == k)
    }

    /// `a`'s throughput over `b`'s, with the numbers behind it.
    pub(super) fn quotient(&self, a: &str, b: &str) -> Option<(f64, String)> {
        let (x, unit_x) = self.find(a).map(|p| (p.throughput, p.unit))?;
        let (y, unit_y) = self.find(b).map(|p| (p.throughput, p.unit))?;
        (y > 0.0).then(|| {
            let data = format!(
                "{a} {} {unit_x} / {b} {} {unit_y}",
                thousands(x),
                thousands(y)
            );
            (x / y, data)
        })
    }

    /// `a`'s throughput over the mean of `before`'s and `after`'s (two
    /// phases measured right before and right after it), with the numbers.
    pub(super) fn over_bracket(&self, a: &str, before: &str, after: &str) -> Option<(f64, String)> {
        let x = self.find(a)?.throughput;
        let (y0, y1) = (self.find(before)?.throughput, self.find(after)?.throughput);
        let mean = (y0 + y1) / 2.0;
        (mean > 0.0).then(|| {
            let data = format!(
                "{a} {} req/s / mean of {before} {} and {after} {} req/s",
                thousands(x),
                thousands(y0),
                thousands(y1)
            );
            (x / mean, data)
        })
    }

    /// `k`'s p99 latency in ms, with the number behind it.
    pub(super) fn p99_ms(&self, k: &str) -> Option<(f64, String)> {
        let v = self.find(k).and_then(|p| p.latency).map(|l| l.p99)?;
        Some((v, format!("{k} p99 {v:.2} ms")))
    }

    /// `measured` when that phase ran, else the `--target` reserve phase.
    pub(super) fn or_target(&self, measured: &'static str) -> &'static str {
        if self.find(measured).is_some() {
            measured
        } else {
            key::RESERVE_TARGET
        }
    }
}
