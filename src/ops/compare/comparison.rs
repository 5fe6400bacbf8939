//! What one comparison of a SKU holds: both stores' figures as read under the
//! discipline of `read.rs`, and what in-flight work explains of their gap
//! (`explain.rs`). Plain data, so the verdicts built on it (`verdict.rs`, the
//! reconciler's) are pure functions with unit tests.

use crate::db::DbError;
use crate::domain::{ReservationStatus, SkuId};
use crate::redis::{RedisError, RedisSnapshot};

/// One SKU read across both stores (see the module documentation of
/// [`crate::ops::compare`] for the order of reads).
#[derive(Debug, Clone)]
pub struct Comparison {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub mysql_available: i64,
    /// The SKU's last movement of stock `mysql_available` counts (0: none;
    /// warm-up records it so later Redis steps for it move nothing).
    pub moved_through: u64,
    /// Live (RESERVED + CONFIRMED) units in the ledger.
    pub ledger_units: i64,
    pub redis: Option<RedisSnapshot>,
    /// Units MySQL has available that Redis does not, explained by work in
    /// flight between the stores (negative: Redis legitimately above MySQL).
    pub in_flight: i64,
    /// Units of reservations Redis took that MySQL has not applied yet.
    pub unapplied: i64,
    /// Those reservations one by one, with their age (empty when not `exact`).
    pub unapplied_records: Vec<Unapplied>,
    /// False when the in-flight figure is an estimate (too many winners).
    pub exact: bool,
    /// Live ledger rows Redis should still hold but has no record of: Redis
    /// lost acknowledged writes (replays and limits would break). 0 when it
    /// cannot be told (not loaded, too many winners).
    pub missing_in_redis: i64,
    /// Buyers holding more live units than `limit_per_user` in MySQL.
    pub buyers_over_limit: i64,
    /// Reservations MySQL holds as RESERVED (or, released, not at all) whose
    /// Redis mirror already shows a final state (empty when not `exact`). The mirror is written only after
    /// MySQL committed that state, so each one is a decision MySQL has since
    /// lost (a failover to a lagging replica) — or one committed between the
    /// two reads, which re-applying finds already done.
    pub decided_in_redis_only: Vec<RedisDecided>,
}

#[cfg(test)]
impl Comparison {
    /// A comparison of SKU 1 as the verdicts' unit tests state it: `total`
    /// stock, MySQL's available and live ledger units, Redis' available
    /// (`None`: not loaded) and the units in flight; exact, nothing else wrong.
    pub(crate) fn sample(
        total: i64,
        mysql: i64,
        live: i64,
        redis: Option<i64>,
        in_flight: i64,
    ) -> Self {
        Self {
            moved_through: 0,
            sku_id: SkuId::new(1).unwrap(),
            total_stock: total,
            mysql_available: mysql,
            ledger_units: live,
            redis: redis.map(|available| RedisSnapshot {
                available,
                total,
                adjust: 0,
                limit_per_user: 1,
                pool: None,
                winners: Some(Vec::new()),
            }),
            in_flight,
            unapplied: in_flight.max(0),
            unapplied_records: Vec::new(),
            exact: true,
            missing_in_redis: 0,
            buyers_over_limit: 0,
            decided_in_redis_only: Vec::new(),
        }
    }
}

/// A final state Redis mirrors that the MySQL row lacks (see
/// [`Comparison::decided_in_redis_only`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisDecided {
    pub request_id: String,
    /// CONFIRMED or RELEASED.
    pub status: ReservationStatus,
}

/// A reservation Redis took (RESERVED/CONFIRMED) that the ledger lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unapplied {
    pub request_id: String,
    pub count: i64,
    /// Admission time, Redis clock.
    pub created_ms: u64,
    /// RESERVED, or CONFIRMED when the payment was decided (and then lost by
    /// MySQL: a confirm is mirrored only after its commit).
    pub status: ReservationStatus,
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
    #[error("SKU {0} does not exist in MySQL")]
    UnknownSku(SkuId),
    /// A repair's re-publish of lost deductions failed (broker down).
    #[error("re-publish of lost deductions: {0}")]
    Republish(String),
}

impl From<crate::ops::lifecycle::LifecycleError> for CompareError {
    fn from(err: crate::ops::lifecycle::LifecycleError) -> Self {
        use crate::ops::lifecycle::LifecycleError;
        match err {
            LifecycleError::Db(e) => Self::Db(e),
            LifecycleError::Redis(e) => Self::Redis(e),
        }
    }
}
