//! Business outcomes of an admission decision. These are values, not errors:
//! a sold-out SKU is a normal answer of a flash sale, not a failure of stockd.

use super::{GateRefusal, OutboxPlace, Reservation};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReserveOutcome {
    /// Stock was taken; the outbox entry at `outbox` carries the deduction.
    Reserved {
        reservation: Reservation,
        available_after: u64,
        outbox: OutboxPlace,
        /// The stock bucket that took it (0 unless the SKU is split); its
        /// outbox holds the entry.
        bucket: u16,
    },
    /// The same `(sku_id, request_id)` was reserved before with the same user and count.
    Replayed { reservation: Reservation },
    /// The request id exists with another user or count.
    Mismatch,
    /// The request id names another client's hold (contract §6.2): nothing
    /// of it is told.
    Taken,
    /// The SKU is not in Redis (never warmed, or Redis lost it).
    NotLoaded,
    /// The buyer's holds on the SKU that lapsed unpaid reached
    /// `limits.max_lapsed_holds` (the replay window's count, in Redis).
    LapseLimit { lapsed: u64, max: u64 },
    /// `bought + count > limit_per_user`.
    LimitExceeded { bought: u64, limit: u64 },
    /// The SKU's sale terms refuse it by Redis's clock (`lib/hold.lua`):
    /// not started, ended, or a pass required. Nothing written.
    Gated(GateRefusal),
    /// The pass, claimed by the admission script, is another hold's
    /// (contract §20). Nothing written.
    PassUsed,
    /// Available is 0.
    SoldOut,
    /// Available is above 0 but below the count asked for.
    Insufficient { available: u64 },
    /// The outbox holds too many unpublished entries: the broker is not keeping up.
    Backpressure,
    /// The buyer used up their attempts (`limits.per_user_*`); retry after this long.
    RateLimited { retry_after_ms: u64 },
    /// A split SKU's stock kept moving between buckets while this request
    /// tried to lease for its bucket; nothing was taken, retry shortly.
    Rebalancing,
}

impl ReserveOutcome {
    /// Label of the `result` dimension in metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Reserved { .. } => "reserved",
            Self::Replayed { .. } => "replayed",
            Self::Mismatch => "mismatch",
            Self::Taken => "id_taken",
            Self::NotLoaded => "not_loaded",
            Self::LimitExceeded { .. } => "limit_exceeded",
            Self::LapseLimit { .. } => "lapse_limit",
            Self::Gated(why) => why.label(),
            Self::PassUsed => "pass_used",
            Self::SoldOut => "sold_out",
            Self::Insufficient { .. } => "insufficient",
            Self::Backpressure => "backpressure",
            Self::RateLimited { .. } => "rate_limited",
            Self::Rebalancing => "rebalancing",
        }
    }
}
