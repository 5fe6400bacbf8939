//! Stage 1: Redis. The key builder, the Lua scripts behind typed functions, and the
//! connection handling of the hot path.
//!
//! Shape: [`RedisStore`] (`store.rs`) builds one shared [`core::Core`] (the
//! hot connection, the keys, the bounded `run`) and hands out one type per
//! aggregate over it: `reservations()`, `skus()`, `buckets()`, `outbox()`,
//! `drift()`, `inspect()`, `subscriptions()`, `nodes()`, `probes()`,
//! `budget()`, `pass_claims()`. Dependencies point
//! one way: every aggregate that routes by bucket holds a `Buckets`; `drift`
//! also holds `Skus` (warm-up registers the SKU); `buckets` depends on no
//! other aggregate. Every key is built in `keys.rs`, every script declared in
//! `scripts.rs`; no Redis command is sent from outside this module but
//! through `side_link`/`primaries` (admin and bench reads of whole nodes).

pub mod admission;
pub mod buckets;
pub mod budget;
pub mod conn;
pub mod core;
pub mod drift;
pub mod finish;
pub mod inspect;
pub mod keys;
pub mod lanes;
pub mod link;
pub mod local_link;
pub mod nodes;
pub mod order_holds;
pub mod order_intents;
pub mod order_recommit;
pub mod orders;
pub mod outbox;
mod outbox_entry;
pub mod pass_claims;
pub mod probes;
pub mod readmit;
pub mod reply;
mod reply_fields;
pub mod reservation;
mod routed;
pub mod scripts;
pub mod sku;
mod sku_cuts;
mod sku_split_cut;
mod sku_step;
pub mod sku_terms;
pub mod store;
pub mod subscriptions;
pub mod tls;
pub mod url;

pub use buckets::{BucketStock, Buckets, PendingTransfer};
pub use budget::{BudgetLine, ClaimOutcome, HoldBudget};
pub use conn::HotConnection;
pub use drift::rebuild::{RebuildCounts, RebuildRow};
pub use drift::{AdjustOutcome, BucketSnapshot, Drift, RedisSnapshot, WinnerRecord};
pub use finish::{FinishItem, FINISH_CHUNK};
pub use inspect::Inspection;
pub use keys::Keys;
pub use link::{NodeAddr, RedisLink};
pub use nodes::Nodes;
pub use orders::{HeldLine, LineRefusal, OrderAsk, OrderOutcome, OrderRecord, Orders};
pub use outbox::{OutboxEntry, OutboxStream, OutboxStreams};
pub use pass_claims::{keep_until_ms, Claim, PassClaims};
pub use probes::Probes;
pub use readmit::ReadmitOutcome;
pub use reservation::{FinishEffect, FinishOutcome, Reservations};
pub use sku::{SkuSnapshot, Skus};
pub use sku_cuts::Settled;
pub use sku_step::{LoadMode, LoadOutcome, Step};
pub use store::RedisStore;
pub use subscriptions::Subscriptions;

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
    /// A command failed while the reserve script decided this request (the
    /// other requests of its batch kept their outcomes).
    #[error("redis reserve script failed for this request: {0}")]
    Script(String),
    /// The call that carried this request's batch failed (`admission.rs`).
    #[error("{0}")]
    Batch(std::sync::Arc<RedisError>),
}
