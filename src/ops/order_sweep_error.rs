//! Why the order sweeper skipped one intent: Redis failed, or MySQL could
//! not say whether it holds the order. The sweeper (`order_sweeper.rs`) and
//! the question it asks MySQL first (`order_recommit.rs`) both answer it.

use crate::db::DbError;
use crate::redis::RedisError;

/// Why one intent was skipped.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// MySQL could not say whether it holds the order: nothing is undone.
    #[error(transparent)]
    Mysql(#[from] DbError),
}

impl SweepError {
    /// The `stage` label of `stockd_order_sweep_failures_total`.
    pub(super) fn stage(&self) -> &'static str {
        match self {
            Self::Redis(_) => "intent",
            Self::Mysql(_) => "mysql",
        }
    }
}
