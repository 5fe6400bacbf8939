//! The expiry storm's own numbers: a burst of reservations whose time to pay
//! ends nearly at once, and how fast the closer gives the units back. Beyond a
//! [`super::PhaseResult`] because the question is a comparison of two rates of
//! the same run (releases per second against the burst's reservations per
//! second) and a lag measured from each reservation's due time, not from a
//! request. [`crate::measure::storm_lags`] turns the ledger's timestamps into them;
//! the phase is [`crate::phases::expiry_storm`].
//!
//! Why the ledger: every released row carries `expires_at_ms` (its due time)
//! and `finished_at_ms` (the time the closer decided the release, the `now` of
//! the transaction that committed it), both in ms of the same clock, so each
//! release's lag is exact to the millisecond without a poller. The end of the
//! storm as a buyer sees it — Redis' available back at the full stock — is
//! polled separately ([`ExpiryStorm::stock_back_after_last_due_ms`]).

use serde::Serialize;

use super::LatencyMs;

/// One released ledger row: its due time and its release time (Unix ms).
#[derive(Debug, Clone, Copy)]
pub struct Released {
    pub expires_at_ms: u64,
    pub finished_at_ms: u64,
}

/// What the storm measured.
#[derive(Debug, Clone, Serialize)]
pub struct ExpiryStorm {
    /// `reservation.ttl_secs` of the storm's child.
    pub ttl_secs: u64,
    /// Reservations admitted by the burst.
    pub reserved: u64,
    /// The burst's reservations per second.
    pub reservations_per_sec: f64,
    /// Rows released (status `RELEASED`, reason `EXPIRED`).
    pub released: u64,
    /// `released` over the time from the first release to the last.
    pub releases_per_sec: f64,
    /// `releases_per_sec / reservations_per_sec` (goal ≥ 1).
    pub release_to_reserve: f64,
    /// From each row's due time to its release (ledger, ms resolution).
    pub lag_ms: Option<LatencyMs>,
    /// From the first due time to the first release.
    pub first_release_after_first_due_ms: i64,
    /// From the last due time to the last release (ledger).
    pub last_release_after_last_due_ms: i64,
    /// From the last due time to Redis' available back at the full stock
    /// (polled, [`crate::phases::expiry_storm`] says at what period).
    pub stock_back_after_last_due_ms: Option<i64>,
    /// Releases by the closer's delivery path (`stockd_closer_releases_total`
    /// with `path="delay_queue"`, after − before); `None` when unreadable.
    pub by_delay_queue: Option<u64>,
    /// Releases by the sweep (`path="sweep"`).
    pub by_sweep: Option<u64>,
    /// Mean reservations per closer batch (`stockd_closer_release_batch_size`).
    pub closer_batch_mean: Option<f64>,
}

/// The numbers of the burst, given before the release is measured.
#[derive(Debug, Clone, Copy)]
pub struct Burst {
    pub ttl_secs: u64,
    pub reserved: u64,
    pub reservations_per_sec: f64,
}

/// Release counters read from the child's `/metrics` (after − before).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReleasePaths {
    pub by_delay_queue: Option<u64>,
    pub by_sweep: Option<u64>,
    pub closer_batch_mean: Option<f64>,
}
