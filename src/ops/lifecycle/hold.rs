//! What the one lifecycle needs to know of a hold, whichever its size.
//!
//! A hold has 1..=`orders.max_lines` lines. A single reservation is a hold of
//! one line, named by its SKU and request id and stored as its ledger row
//! ([`SingleHold`]); an order is a hold of N lines, named by its order
//! id and stored as an `orders` row plus one ledger row per line
//! ([`OrderHold`]). Storage stays as each was written (a previous
//! release runs beside this one); what is one is the code that moves them:
//! `transition`, `extend` and the proof of a lost decision (`recovered`) are
//! written once over this trait, and each kind says only
//! - which rows it locks, in the ledger lock protocol's order (its SKU rows
//!   ascending, then the row that decides, then the lines) — [`Hold::lock`];
//! - the one conditional update that decides, and the lines that follow it
//!   in the same transaction — [`Hold::finish_locked`], [`Hold::extend_locked`];
//! - how Redis mirrors the decision — [`Hold::mirror_decided`],
//!   [`Hold::mirror_extension`];
//! - where Redis keeps the proof of a decision MySQL lost — [`Hold::record`],
//!   [`Hold::reapply_extension`].

use std::fmt;

use crate::db::{Conn, Db, DbError, Transaction};
use crate::domain::{RequestId, Requester, ReservationStatus, SkuId};
use crate::events::Outgoing;
use crate::redis::{RedisError, RedisStore};

use super::{LifecycleError, Transition};

/// A single reservation (the routes under `/v1/skus/{sku_id}/reservations`).
#[derive(Debug, Clone, Copy)]
pub struct SingleHold<'a> {
    pub sku_id: SkuId,
    pub request_id: &'a RequestId,
}

impl fmt::Display for SingleHold<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sku {} request {}", self.sku_id, self.request_id)
    }
}

/// A whole order (the routes under `/v1/orders/{order_id}`).
#[derive(Debug, Clone, Copy)]
pub struct OrderHold<'a> {
    pub order_id: &'a RequestId,
}

impl fmt::Display for OrderHold<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "order {}", self.order_id)
    }
}

/// The row that decides a hold (a ledger row, an order row).
pub trait HoldRow: Clone {
    fn status(&self) -> ReservationStatus;
    fn expires_at_ms(&self) -> u64;
}

/// One kind of hold. The futures are `Send` wherever the kind is named
/// (every caller names one), so the trait leaves that bound out.
#[allow(async_fn_in_trait)]
pub trait Hold: Sync + std::fmt::Display {
    /// The row that decides.
    type Row: HoldRow + Send + Sync;
    /// Its Redis record.
    type Record: Send + Sync;
    /// A `REJECTED` row found by a transition is mirrored (the quota back
    /// in Redis): a reservation applied by the lock step may be rejected.
    const MIRRORS_REJECTION: bool;

    /// The deciding row as MySQL has it, unlocked (the proof's read).
    async fn row(&self, db: &Db) -> Result<Option<Self::Row>, DbError>;

    /// The Redis record, the proof of what MySQL may have lost.
    async fn record(&self, redis: &RedisStore) -> Result<Option<Self::Record>, RedisError>;

    /// What the record proves: its status and its time.
    fn proves(record: &Self::Record) -> (ReservationStatus, u64);

    /// Re-applies an extension the record proves and MySQL lost (a no-op
    /// unless the record is the same admission with a later time).
    async fn reapply_extension(
        &self,
        db: &Db,
        redis: &RedisStore,
        row: &Self::Row,
        record: &Self::Record,
    ) -> Result<(), LifecycleError>;

    /// Finds the hold (applying it from Redis first when the consumer is
    /// behind) and locks its SKU rows and deciding row, in a transaction the
    /// caller finishes. Another client's hold is `NotFound`, nothing written.
    async fn lock<'c>(
        &self,
        conn: &'c mut Conn,
        db: &Db,
        redis: &RedisStore,
        requester: &Requester,
        release_as: Transition,
        now_ms: u64,
    ) -> Result<Located<'c, Self::Row>, LifecycleError>;

    /// The decision on the locked `RESERVED` row, the lines following it, the
    /// events noted in `out`. Returns the row as decided (mirror pending).
    async fn finish_locked(
        &self,
        tx: &mut Transaction<'_>,
        row: &Self::Row,
        transition: Transition,
        now_ms: u64,
        out: &mut Outgoing,
    ) -> Result<Self::Row, DbError>;

    /// Moves the locked `RESERVED` row's time (and its lines') by `by_ms`
    /// unless it had `max` extensions: the row as moved and its count.
    async fn extend_locked(
        &self,
        tx: &mut Transaction<'_>,
        row: &Self::Row,
        by_ms: u64,
        max: u32,
    ) -> Result<Option<(Self::Row, u32)>, DbError>;

    /// Mirrors a decided row to Redis; a failure is left to the sweep.
    async fn mirror_decided(&self, db: &Db, redis: &RedisStore, row: &Self::Row);

    /// Mirrors an extension to Redis and counts it; a failure changes no
    /// decision (the closer and the sweep read MySQL's time).
    async fn mirror_extension(&self, redis: &RedisStore, row: &Self::Row, extensions: u32);
}

/// A hold's deciding row, locked in `tx`; the caller commits.
pub struct Locked<'c, R> {
    pub tx: Transaction<'c>,
    /// The row as it is under the lock.
    pub row: R,
    /// The events of the transaction so far (a deduction applied first).
    pub out: Outgoing,
}

/// Where the lock step found the hold.
pub enum Located<'c, R> {
    Locked(Locked<'c, R>),
    /// MySQL lost a reservation with its release; recorded RELEASED now.
    ReleaseRecorded(R),
    /// A line of an order named as a single reservation: it moves only with
    /// its whole order, never alone.
    OrderLine,
    /// No such hold in MySQL or Redis (or no such SKU), or another client's.
    NotFound,
}

/// How a transition found the hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransitionOutcome<R = crate::db::ledger::LedgerRow> {
    /// The hold is in the target state (now, or already before: a repeat).
    Done { row: R, changed: bool },
    /// The hold ended another way; `row`'s status says how.
    Conflict { row: R },
    /// An expiry that came before the hold's time (it stays).
    NotYetExpired,
    /// No such hold in MySQL or Redis.
    NotFound,
    /// A line of an order named alone: only the whole order moves.
    OrderLine,
}

/// A whole order's transition outcome.
pub type OrderTransitionOutcome = TransitionOutcome<crate::db::orders::OrderRow>;

impl HoldRow for crate::db::ledger::LedgerRow {
    fn status(&self) -> ReservationStatus {
        self.status
    }
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

impl HoldRow for crate::db::orders::OrderRow {
    fn status(&self) -> ReservationStatus {
        self.status
    }
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}
