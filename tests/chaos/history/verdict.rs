//! What the history check found: the ok / fail / info tallies, the findings
//! that fail a scenario (lost, duplicated, unexpected), the outcomes a
//! declared loss allows, and the one line per scenario that reports them.

use std::collections::BTreeMap;

use super::record::Entry;
use crate::load::Op;

/// Offending operations shown per kind of finding.
const SHOWN_PER_KIND: usize = 5;

/// Findings of one kind: how many, and the first few in words.
#[derive(Debug, Default, Clone)]
pub struct Findings {
    pub count: usize,
    pub first: Vec<String>,
}

impl Findings {
    pub fn add(&mut self, what: String) {
        self.count += 1;
        if self.first.len() < SHOWN_PER_KIND {
            self.first.push(what);
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct Verdict {
    pub ok: usize,
    pub fail: usize,
    pub info: usize,
    /// Info operations by op: (taken, not taken). Taken: its effect is in the
    /// ledger (a reserve that made the row no ok answer made, a confirm or
    /// cancel whose state the row holds).
    pub info_by_op: BTreeMap<Op, (usize, usize)>,
    /// The first few info operations that were taken, for the report.
    pub taken: Findings,
    /// Acknowledged outcomes the stores do not hold.
    pub lost: Findings,
    /// Stock taken twice for one id (two admissions, two ledger rows).
    pub duplicated: Findings,
    /// Anything else the model does not allow.
    pub unexpected: Findings,
    /// Outcomes a declared loss allows, by name.
    pub allowed: BTreeMap<String, Findings>,
    /// The declarations, in words (empty: none, the check was strict).
    pub declared: String,
}

impl Verdict {
    /// Counts one info operation, taken or not.
    pub fn info_went(&mut self, e: &Entry, taken: bool) {
        let slot = self.info_by_op.entry(e.req.op).or_default();
        match taken {
            true => {
                slot.0 += 1;
                self.taken.add(e.describe());
            }
            false => slot.1 += 1,
        }
    }

    pub fn info_taken(&self) -> usize {
        self.info_by_op.values().map(|t| t.0).sum()
    }

    pub fn info_not_taken(&self) -> usize {
        self.info_by_op.values().map(|t| t.1).sum()
    }

    pub fn allow(&mut self, name: &str, what: String) {
        self.allowed.entry(name.to_string()).or_default().add(what);
    }

    pub fn passed(&self) -> bool {
        self.lost.count == 0 && self.duplicated.count == 0 && self.unexpected.count == 0
    }

    /// `history: ok 812, fail 143, info 37 (taken 4, not taken 33), lost 0, …`
    pub fn line(&self) -> String {
        format!(
            "history: ok {}, fail {}, info {} (taken {}, not taken {}), lost {}, duplicated {}, \
             unexpected {}",
            self.ok,
            self.fail,
            self.info,
            self.info_taken(),
            self.info_not_taken(),
            self.lost.count,
            self.duplicated.count,
            self.unexpected.count
        )
    }

    /// The scenario's failure line: the counts and the first offending ops,
    /// so the panic message alone says what went wrong.
    pub fn failure(&self) -> String {
        let mut text = format!(
            "history: lost {}, duplicated {}, unexpected {}",
            self.lost.count, self.duplicated.count, self.unexpected.count
        );
        for (name, f) in [
            ("lost", &self.lost),
            ("duplicated", &self.duplicated),
            ("unexpected", &self.unexpected),
        ] {
            for what in &f.first {
                text.push_str(&format!("\n    {name}: {what}"));
            }
        }
        text
    }

    /// The line, what the declared loss allowed, and the first offending ops.
    pub fn print(&self, scenario: &str) {
        println!("[{scenario}] {}", self.line());
        if !self.info_by_op.is_empty() {
            let by_op: Vec<String> = self
                .info_by_op
                .iter()
                .map(|(op, (taken, not))| format!("{op:?} {} (taken {taken})", taken + not))
                .collect();
            println!("[{scenario}] history: info by op: {}", by_op.join(", "));
        }
        if !self.declared.is_empty() {
            let allowed: Vec<String> = self
                .allowed
                .iter()
                .map(|(name, f)| format!("{name} {}", f.count))
                .collect();
            let allowed = if allowed.is_empty() {
                "nothing".to_string()
            } else {
                allowed.join(", ")
            };
            println!(
                "[{scenario}] history: allowed by the declared loss ({}): {allowed}",
                self.declared
            );
        }
        for (name, f) in [
            ("lost", &self.lost),
            ("duplicated", &self.duplicated),
            ("unexpected", &self.unexpected),
            ("info taken", &self.taken),
        ]
        .into_iter()
        .chain(self.allowed.iter().map(|(n, f)| (n.as_str(), f)))
        {
            for what in &f.first {
                println!("    {name}: {what}");
            }
        }
    }
}
