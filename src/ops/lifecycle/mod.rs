//! The lifecycle of a hold (contract §5): confirm, cancel, expire, extend.
//! A hold has 1..=`orders.max_lines` lines: a single reservation is a hold
//! of one line, an order a hold of N (`hold`, `single`, `order`); one
//! transition, one extension and one proof of a lost decision serve both.
//!
//! MySQL decides. Each decision is one transaction under the ledger lock
//! protocol — the hold's SKU rows in ascending id order, then the row that
//! decides (the ledger row of a single reservation, the order row of an
//! order), then the lines — and one conditional update
//! `... WHERE status = 'RESERVED'` of the deciding row, the lines following
//! it in the same transaction. So when payment and expiry race exactly one
//! wins and the other sees the final state, and no order is ever half
//! decided. A release gives the units back to `available_stock` in the same
//! transaction.
//!
//! Order of arrival never matters: a decision that finds no row yet (the
//! consumer is behind) first applies the hold from its Redis record, exactly
//! as the consumer would, then decides; the late deduction message is then a
//! duplicate the consumer skips.
//!
//! Redis mirrors the decision afterwards (`mirror`), and only after MySQL
//! committed, so a record that says CONFIRMED proves the payment was decided
//! — even when MySQL lost that commit (a failover to a lagging replica). A
//! cancel or an expiry of such a hold therefore re-applies the confirm
//! instead and answers as if the payment had won the race: a paid unit is
//! never released; a released one is never confirmed (`recovered`,
//! docs/operations.md "MySQL failover").
//!
//! Holds belong to their client (contract §6.2): a confirm, cancel or
//! extension asked by a client of another client's hold finds it nowhere
//! (`NotFound`) before anything is written — checked on the row, or, when
//! the consumer has not applied it yet, on the Redis record the lock step
//! reads anyway (`Hold::lock`).

mod expire_many;
mod extend;
mod hold;
mod locate;
mod mirror;
mod order;
mod recovered;
mod single;
mod transition;

pub use expire_many::{expire_many, mirror_many, release_expired};
pub use extend::{extend, ExtendOutcome, Extension, OrderExtendOutcome};
pub use hold::{Hold, HoldRow, OrderHold, OrderTransitionOutcome, SingleHold, TransitionOutcome};
pub use mirror::mirror;
pub(crate) use mirror::reopen_split_sku;
pub use transition::{reapply_lost, transition};

use crate::db::ledger::reason;
use crate::db::DbError;
use crate::domain::ReservationStatus;
use crate::redis::RedisError;

/// Deadlock / lock-timeout retries of one decision.
const TRANSITION_RETRIES: u32 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The order service reports payment.
    Confirm,
    /// The buyer or order service cancels.
    Cancel,
    /// The time to pay ran out (closer).
    Expire,
}

impl Transition {
    fn target(self) -> ReservationStatus {
        match self {
            Self::Confirm => ReservationStatus::Confirmed,
            Self::Cancel | Self::Expire => ReservationStatus::Released,
        }
    }

    fn reason(self) -> Option<&'static str> {
        match self {
            Self::Confirm => None,
            Self::Cancel => Some(reason::CANCELLED),
            Self::Expire => Some(reason::EXPIRED),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
}

/// `decision` within one `mysql.query_timeout_ms` (its reads and every
/// retry): past it, `QueryTimeout` (docs/architecture.md, "Every wait is
/// bounded").
async fn within_query_bound<T>(
    db: &crate::db::Db,
    decision: impl std::future::Future<Output = Result<T, LifecycleError>>,
) -> Result<T, LifecycleError> {
    match tokio::time::timeout(db.operation_bound(), decision).await {
        Ok(result) => result,
        Err(_) => Err(LifecycleError::Db(DbError::QueryTimeout)),
    }
}

/// Runs `attempt` again on a deadlock or lock-wait timeout, at most
/// [`TRANSITION_RETRIES`] more times.
async fn retried<T, F, Fut>(mut attempt: F) -> Result<T, LifecycleError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, LifecycleError>>,
{
    let mut retries = 0;
    loop {
        match attempt().await {
            Err(LifecycleError::Db(err)) if err.is_retryable() && retries < TRANSITION_RETRIES => {
                retries += 1;
            }
            other => return other,
        }
    }
}
