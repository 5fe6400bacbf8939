//! "Every answer within its documented bound" (contract §10.9, architecture.md
//! "Every wait is bounded"), checked over a window of a load run: every
//! answer of one operation sent in the window came within the bound, with an
//! allowed status, and the status the fault should produce was seen.
//! Shared by s09 (freezes) and s18–s22 (partitions).

use std::collections::BTreeMap;

use super::Scenario;
use crate::load::{Answer, Op};

/// Scheduling slack on a busy 2-core machine with debug builds.
pub const MARGIN_MS: u64 = 1_000;

/// A stretch of a load run, in ms since the load started.
#[derive(Debug, Clone)]
pub struct Window {
    pub name: String,
    pub from_ms: u64,
    pub to_ms: u64,
}

impl Window {
    pub fn new(name: &str, from_ms: u64, to_ms: u64) -> Self {
        Self {
            name: name.to_string(),
            from_ms,
            to_ms,
        }
    }

    /// The `op` answers sent inside the window.
    pub fn of<'a>(&self, answers: &'a [Answer], op: Op) -> Vec<&'a Answer> {
        answers
            .iter()
            .filter(|a| a.op == op && a.sent_ms >= self.from_ms && a.sent_ms < self.to_ms)
            .collect()
    }
}

/// What one operation must look like inside a window.
pub struct Bound<'a> {
    pub op: Op,
    pub bound_ms: u64,
    /// Statuses allowed (business answers are fine: a request sent just
    /// before the fault ends may be served normally).
    pub statuses: &'a [u16],
    /// At least one answer with this status (the fault's own answer).
    pub expected: Option<u16>,
}

/// Records the expectations of `bound` over `window`.
pub fn judge(sc: &mut Scenario, answers: &[Answer], window: &Window, bound: &Bound) {
    let during = window.of(answers, bound.op);
    let op = bound.op;
    let slowest = during.iter().map(|a| a.latency_ms).max().unwrap_or(0);
    let late = during
        .iter()
        .filter(|a| a.latency_ms > bound.bound_ms)
        .count();
    let mut by_status: BTreeMap<(u16, &str), usize> = BTreeMap::new();
    for a in &during {
        *by_status.entry((a.status, a.code.as_str())).or_default() += 1;
    }
    let wrong = during
        .iter()
        .filter(|a| !bound.statuses.contains(&a.status))
        .count();
    sc.expect(
        !during.is_empty() && late == 0,
        format!(
            "{}: {op:?} max latency {slowest} ms <= {} ms ({late} of {} late)",
            window.name,
            bound.bound_ms,
            during.len()
        ),
    );
    let seen = bound
        .expected
        .is_none_or(|want| during.iter().any(|a| a.status == want));
    sc.expect(
        wrong == 0 && seen,
        format!(
            "{}: {op:?} answers {by_status:?}; allowed {:?}, expected some {:?}",
            window.name, bound.statuses, bound.expected
        ),
    );
}

/// Prints the slowest answer of each operation in each window.
pub fn print_slowest(sc: &Scenario, answers: &[Answer], windows: &[Window]) {
    for w in windows {
        let parts: Vec<String> = [Op::Reserve, Op::Confirm, Op::Cancel]
            .iter()
            .filter_map(|op| {
                let during = w.of(answers, *op);
                let max = during.iter().map(|a| a.latency_ms).max()?;
                Some(format!("{op:?} {max} ms (of {})", during.len()))
            })
            .collect();
        sc.note(&format!("slowest in {}: {}", w.name, parts.join(", ")));
    }
}
