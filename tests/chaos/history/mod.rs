//! A Jepsen-style history of every client operation of a scenario, checked
//! against the final stores at `Scenario::finish`.
//!
//! The audit says the stores agree with each other; only the history can say
//! they agree with what the clients were told. Every reserve, confirm and
//! cancel — the load driver's and the scenario's direct calls — is recorded as
//! an invocation and its completion (ok / fail / info, `record.rs`); after the
//! drain the ledger is checked against the model (`check.rs`): no acknowledged
//! operation lost, nothing taken twice, nothing in the ledger nobody was
//! answered for, replays answering the first answer. Faults that may
//! legitimately change an acknowledged outcome are declared by the scenario
//! (`loss.rs`) and counted apart. docs/chaos.md, "History check", has the rules.

mod check;
mod client;
mod loss;
mod record;
mod verdict;

use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use check::check;
pub use client::{call, call_with_pass};
pub use loss::{Allowances, Declared, RedisLoss};
pub use record::{Entry, Request};

/// The shared recorder: cheap to clone, one per scenario.
#[derive(Debug, Clone)]
pub struct History {
    /// Time zero of every `…_ms` of the history (scenario start).
    epoch: Instant,
    entries: Arc<Mutex<Vec<Entry>>>,
    declared: Arc<Mutex<Vec<Declared>>>,
}

impl History {
    pub fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            entries: Arc::default(),
            declared: Arc::default(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    pub fn record(&self, entry: Entry) {
        self.entries.lock().unwrap().push(entry);
    }

    /// Declares that Redis lost writes the way `kind` describes, in a fault
    /// that began at `from_ms` (a [`Self::now_ms`] taken before it) and is
    /// over now.
    pub fn declare(&self, kind: RedisLoss, what: &str, from_ms: u64) {
        self.declared.lock().unwrap().push(Declared {
            kind,
            what: what.to_string(),
            from_ms,
            to_ms: self.now_ms(),
        });
    }

    /// Every entry so far, in completion order.
    pub fn entries(&self) -> Vec<Entry> {
        self.entries.lock().unwrap().clone()
    }

    pub fn allowances(&self, durability_redis: bool) -> Allowances {
        Allowances {
            declared: self.declared.lock().unwrap().clone(),
            durability_redis,
        }
    }
}
