//! Stage 1: Redis. The key builder, the Lua scripts behind typed functions, and the
//! connection handling of the hot path.

pub mod buckets;
pub mod conn;
pub mod drift;
pub mod inspect;
pub mod keys;
pub mod link;
pub mod local_link;
pub mod outbox;
pub mod readmit;
pub mod rebuild;
pub mod reply;
pub mod reservation;
pub mod scripts;
pub mod sku;
pub mod store;

pub use conn::HotConnection;
pub use drift::{AdjustOutcome, BucketSnapshot, PendingTransfer, RedisSnapshot, WinnerRecord};
pub use keys::Keys;
pub use link::{NodeAddr, RedisLink};
pub use outbox::{OutboxEntry, OutboxStream};
pub use readmit::ReadmitOutcome;
pub use rebuild::{RebuildCounts, RebuildRow};
pub use reservation::FinishOutcome;
pub use sku::{LoadOutcome, SkuSnapshot};
pub use store::RedisStore;

/// Failures talking to Redis. Business refusals are never errors (see
/// [`crate::domain::ReserveOutcome`]).
#[derive(Debug, thiserror::Error)]
pub enum RedisError {
    #[error("redis pool: {0}")]
    Pool(String),
    #[error("redis: {0}")]
    Command(#[from] deadpool_redis::redis::RedisError),
    #[error("redis script answered something unexpected: {0}")]
    BadReply(String),
    #[error("redis call did not finish within connect + command timeout")]
    Timeout,
    #[error("redis state kept moving: {0}")]
    Unsettled(String),
}
