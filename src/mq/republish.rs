//! The properties of the messages a role sends again on its own: a
//! deduction MySQL refused, parked in the retry queue or the DLQ (consumer),
//! and an expiry that came before its reservation's extended time, queued to
//! wait once more (closer). A dead-lettered delivery keeps its own
//! ([`Delivery::dead_letter_properties`](super::Delivery::dead_letter_properties)).

use lapin::BasicProperties;

use super::message;
use super::publisher::{headers_with_reason, PERSISTENT};
use crate::domain::Deduction;

/// The properties of `msg` parked after `attempt` refusals: its message id
/// (so the ledger's idempotency sees the same deduction), persistent, and
/// the attempt and `reason` in its headers.
pub fn parked(msg: &Deduction, attempt: u32, reason: &str) -> BasicProperties {
    BasicProperties::default()
        .with_message_id(message::message_id(msg).into())
        .with_delivery_mode(PERSISTENT)
        .with_headers(headers_with_reason(attempt, reason))
}

/// The properties of `msg`'s expiry sent to wait again: its message id,
/// JSON, persistent.
pub fn expiry_again(msg: &Deduction) -> BasicProperties {
    BasicProperties::default()
        .with_message_id(message::message_id(msg).into())
        .with_content_type("application/json".into())
        .with_delivery_mode(PERSISTENT)
}
