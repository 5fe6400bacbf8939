//! The drop's own numbers (`phases::drop`): a crowd waiting on its
//! connections for a sale that opens at T, passes required, the hold budget
//! on. Beyond a [`super::PhaseResult`] because the questions are about
//! windows of one run, not one rate: how long from T until the last unit was
//! held, how fast the first second was answered, what the crowd was told
//! before T and what those early answers cost Redis.

use std::collections::BTreeMap;

use serde::Serialize;

use super::LatencyMs;

/// What the drop measured.
#[derive(Debug, Clone, Serialize)]
pub struct DropSale {
    /// Units of the SKU; one per buyer (`limit_per_user` 1).
    pub stock: i64,
    /// Buyers with a pass each: more than the stock, so the sale sells out
    /// and the rest meet `SOLD_OUT`.
    pub buyers: u64,
    /// Connections of the crowd, all open before T.
    pub connections: usize,
    /// How long before T the crowd arrived (ms).
    pub crowd_before_ms: u64,
    /// `sale.clock_margin_ms` of the child: earlier than this before T an
    /// api answers `SALE_NOT_STARTED` from memory.
    pub clock_margin_ms: u64,
    /// `limits.buyer_max_live_units` of the child (the hold budget, on).
    pub buyer_max_live_units: u32,
    /// Holds answered 201/202.
    pub held: u64,
    /// T → the answer of the last hold (ms); `None` when the stock did not
    /// sell out.
    pub sold_out_after_ms: Option<f64>,
    /// Holds per second from T to sold out.
    pub holds_per_sec: f64,
    /// Answers per second from T until the crowd was done.
    pub answers_per_sec: f64,
    /// Latency of the answers of the first second after T.
    pub first_second: Option<LatencyMs>,
    /// How many answers the first second had.
    pub first_second_answers: u64,
    /// Answers earlier than the margin before T, by label (from memory).
    pub before_margin: BTreeMap<String, u64>,
    /// Answers within the margin before T, by label (Redis decides).
    pub within_margin: BTreeMap<String, u64>,
    /// Redis calls of the second before the crowd came (nothing asked: the
    /// child's background loops alone).
    pub redis_quiet: RedisWindow,
    /// Redis calls while the crowd was answered earlier than the margin.
    pub redis_before_margin: RedisWindow,
    /// Redis calls while the crowd was answered within the margin.
    pub redis_within_margin: RedisWindow,
    /// Requests sent with a forged pass after the sale (403 `PASS_INVALID`).
    pub refused_passes: u64,
    /// Redis calls while they were answered.
    pub redis_refused_passes: RedisWindow,
}

/// Redis calls of one window, from `INFO commandstats` of the drop's private
/// redis-server (nobody but the child talks to it).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RedisWindow {
    pub ms: f64,
    /// Every command.
    pub calls: u64,
    /// Script calls (`EVALSHA`/`EVAL`): admissions, pass and budget claims.
    pub script_calls: u64,
    /// Calls per command.
    pub by_command: BTreeMap<String, u64>,
}
