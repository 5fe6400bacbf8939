//! The transactional-outbox half of stage 2: getting each deduction the reserve
//! script wrote into the outbox stream onto the broker, exactly as RocketMQ's
//! half message + check-back would.
//!
//! - [`handoff`]: publish one entry with a confirm, then have it removed.
//! - [`group`]: group commit — several deductions per broker message, several
//!   messages awaiting confirms at once.
//! - [`acker`]: removes confirmed entries from the stream in batches (XDEL).
//! - [`relay`]: re-publishes entries left behind (api crash, broker down, timeout).

pub mod acker;
pub mod group;
pub mod handoff;
pub mod relay;

pub use acker::OutboxAcker;
pub use group::GroupCommit;
pub use handoff::Handoff;
pub use relay::Relay;
