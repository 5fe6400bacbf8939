//! The transactional-outbox half of stage 2: getting each deduction the reserve
//! script wrote into the outbox stream onto the broker, exactly as RocketMQ's
//! half message + check-back would.
//!
//! - [`group`]: publish entries with confirms, group-committed (several
//!   deductions per broker message, several messages awaiting confirms at once);
//!   a confirmed entry is handed to the acker. With events on, a batch's
//!   `reserved` events are published beside it (`events`, module doc).
//! - [`acker`]: removes confirmed entries from the stream in batches (XDEL);
//!   an entry a batch of reservations shares goes when all are confirmed
//!   ([`shared_entries`]).
//! - [`relay`]: re-publishes entries left behind (api crash, broker down, timeout).
//! - [`event_relay`]: the same for the other outbox, MySQL's `event_outbox`:
//!   publishes the events committed transactions staged (`events`).

pub mod acker;
pub mod event_relay;
pub mod group;
pub mod relay;
pub mod shared_entries;

pub use acker::OutboxAcker;
pub use event_relay::EventRelay;
pub use group::{GroupCommit, OrderLineEntry, ReservedEvents};
pub use relay::Relay;
