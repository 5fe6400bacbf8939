//! The `stock_deduct_idempotent` ledger (contract §4), one file per concern: the
//! consumer's batched apply (`apply`, orders in `apply_order`, with what both
//! read in `held` and `known` and retell by in `first_telling`) and its inserts (`insert`), reads
//! (`read`), final states ([`settle`]) and consistent-snapshot lookups
//! ([`snapshot`]). This file holds the row and report types they share.

mod apply;
mod apply_order;
mod first_telling;
mod held;
mod insert;
mod known;
mod order_chunks;
mod read;
pub mod settle;
pub mod snapshot;

use mysql_async::{IsolationLevel, TxOpts};

pub use crate::domain::Readmission;
use crate::domain::{Deduction, RequestId, ReservationStatus, SkuId, UserId};
pub use apply::{apply_batch, apply_batch_told, Telling};
pub use insert::{insert_rows, note_inserted, NewRow};
pub use order_chunks::ORDER_LINES_PER_TX;
pub use read::{
    buyers_over_limit, expired_for_update, find, find_for_update, find_many, find_many_for_update,
    is_order_line, live_ids_since, live_units, page_since, pending_mirrors,
};

/// Rows per multi-row INSERT (and ids per `IN` list), sent as text
/// (`sql_text`): ~150 bytes a row, far below `max_allowed_packet`.
const INSERT_CHUNK_ROWS: usize = 500;

/// Why a row was rejected or released; stored in `reason`.
pub mod reason {
    /// MySQL could not cover the deduction: Redis admitted more than exists.
    pub const OVER_ADMITTED: &str = "OVER_ADMITTED";
    /// The buyer already holds `limit_per_user` live units in MySQL: Redis
    /// admitted it after losing the buyer's counter. The unit exists, so the
    /// Redis mirror gives it back to `available`.
    pub const LIMIT_EXCEEDED: &str = "LIMIT_EXCEEDED";
    /// The SKU does not exist in MySQL.
    pub const UNKNOWN_SKU: &str = "UNKNOWN_SKU";
    /// Another line of the same order did not fit: the whole order is
    /// refused, and this line's unit, which MySQL still has, goes back in
    /// Redis with the quota.
    pub const ORDER_REJECTED: &str = "ORDER_REJECTED";
    pub const CANCELLED: &str = "CANCELLED";
    pub const EXPIRED: &str = "EXPIRED";

    /// Whether a `REJECTED` row with this reason still has its unit in MySQL's
    /// stock, so Redis must return the unit it took (not only the quota).
    pub fn rejection_returns_stock(reason: Option<&str>) -> bool {
        matches!(reason, Some(LIMIT_EXCEEDED | ORDER_REJECTED))
    }

    /// The reason a refusal of the admission rule is stored with (a single
    /// reservation's fit and an order line's alike).
    pub(in crate::db::ledger) fn of(refusal: crate::domain::admission::Refusal) -> &'static str {
        use crate::domain::admission::Refusal;
        match refusal {
            Refusal::LimitExceeded => LIMIT_EXCEEDED,
            Refusal::OverAdmitted => OVER_ADMITTED,
        }
    }
}

/// What one batch did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BatchReport {
    /// New rows inserted as `RESERVED` (stock taken).
    pub applied: usize,
    /// Deliveries whose `(sku_id, request_id)` was already in the ledger.
    pub duplicates: usize,
    /// New rows inserted as `REJECTED`, with the reason.
    pub rejected: Vec<(Deduction, &'static str)>,
    /// Duplicates admitted by Redis at another time than the ledger row: Redis
    /// lost the first record and took the request id again (see
    /// `RedisStore::settle_readmission`).
    pub readmitted: Vec<Readmission>,
    /// Duplicates whose ledger row belongs to another buyer, with that
    /// buyer: a SKU split into buckets admits a request id once per bucket
    /// (see `RedisStore::reject_foreign_duplicate`).
    pub foreign: Vec<(Deduction, UserId)>,
    /// The batch's reservation events (`persisted`, `rejected`; the same
    /// events again for duplicates), for the consumer to publish after the
    /// commit and before its ack — not staged in `event_outbox`: a delivery
    /// that is not acked comes back, and its duplicates tell them again
    /// (same ids). The SKU crossings of the batch are staged as usual.
    pub told: Vec<crate::events::Event>,
}

/// A ledger row as the lifecycle and the API read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    pub sku_id: SkuId,
    pub request_id: RequestId,
    pub user_id: UserId,
    pub count: u32,
    pub status: ReservationStatus,
    pub reason: Option<String>,
    pub reserved_at_ms: u64,
    pub expires_at_ms: u64,
    pub redis_pending: bool,
    /// The client that made it (`sql/0010_hold_client.sql`); none: a hold
    /// of no one.
    pub client: Option<String>,
}

impl LedgerRow {
    /// The row the consumer inserted for a deduction it rejected.
    pub fn rejected(msg: &Deduction, why: &str) -> Self {
        Self {
            sku_id: msg.sku_id,
            request_id: msg.request_id.clone(),
            user_id: msg.user_id,
            count: msg.count,
            status: ReservationStatus::Rejected,
            reason: Some(why.to_string()),
            reserved_at_ms: msg.created_ms,
            expires_at_ms: msg.expires_ms,
            redis_pending: true,
            client: msg.client.clone(),
        }
    }

    pub fn to_reservation(&self) -> crate::domain::Reservation {
        crate::domain::Reservation {
            request_id: self.request_id.clone(),
            sku_id: self.sku_id,
            user_id: self.user_id,
            count: self.count,
            status: self.status,
            created_at_ms: self.reserved_at_ms,
            expires_at_ms: self.expires_at_ms,
            client: self.client.clone(),
        }
    }
}

/// Read-committed: with the SKU row lock serializing ledger writers, every read
/// after the lock sees the latest committed rows; no gap locks are needed.
pub fn tx_opts() -> TxOpts {
    let mut opts = TxOpts::default();
    opts.with_isolation_level(IsolationLevel::ReadCommitted);
    opts
}
