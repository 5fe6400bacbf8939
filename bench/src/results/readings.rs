//! Readings a phase result carries from the servers: Redis stalls (from
//! `SLOWLOG`, [`crate::measure::slowlog`]) and group-commit batch sizes
//! (from the child's `/metrics`, [`crate::stack::batches`]).

use serde::Serialize;

/// One slow command: what it was and how long Redis was blocked.
#[derive(Debug, Clone, Serialize)]
pub struct Stall {
    pub command: String,
    pub blocked_ms: f64,
}

/// Mean batch sizes between two readings; `None` where no batch happened.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct BatchSizes {
    /// Deductions per broker message published.
    pub per_message: Option<f64>,
    /// Messages published during the phase.
    pub messages: u64,
    /// Deductions per consumer MySQL transaction.
    pub per_transaction: Option<f64>,
    /// Reservations per reserve script call (batch admission).
    pub per_reserve_call: Option<f64>,
}
