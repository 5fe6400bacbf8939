//! The sold-out short-circuit (contract §7).
//!
//! Once a hot SKU is gone, requests keep coming; each one that reaches Redis
//! spends a round trip on the busiest single-threaded server we have. Every api
//! node keeps a local board of sold-out SKUs and answers 409 `SOLD_OUT` from
//! memory.
//!
//! - [`board`]: the local flags and the decision "short-circuit or ask Redis".
//! - [`subscriber`]: keeps the board in step with Redis (Pub/Sub events, a reload
//!   of the durable markers after every (re)subscribe, periodic re-validation).
//!
//! Replays: a buyer retrying a request that *did* win must get its stored
//! outcome, not `SOLD_OUT`. When a SKU is flagged, the board also holds the set
//! of request ids that took stock (`{sku}:winners`, written by the reserve
//! script); a flagged request whose id is in that set goes to Redis and gets its
//! replay, every other one is refused locally. The set is bounded by the stock
//! sold; above `soldout.max_tracked_winners` the SKU is not short-circuited.

pub mod board;
pub mod subscriber;

pub use board::SoldOutBoard;
