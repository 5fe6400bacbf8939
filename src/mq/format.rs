//! The format version every deduction message carries, so a rolling upgrade
//! stays safe in both directions (docs/operations.md, "Upgrades").
//!
//! The version travels in the AMQP header `x-stockd-format`, not in the
//! body: a single reservation's body is what it always was, so a consumer of
//! a release before versions (which ignores headers) still reads it.
//!
//! - 1: single reservations only; a message without the header is this
//!   (every release before orders).
//! - 2: deductions that may be order lines (`Deduction::order`).
//! - 3: deductions that may name the client that made the hold
//!   (`Deduction::client`, contract §6.2). Only a message that carries a
//!   client is stamped 3 ([`of_deductions`]): without `auth.required` the
//!   messages stay format 2, readable by the release before owners.
//! - 4: the warm-up's probe (`mq/probe.rs`), which carries no deduction:
//!   deductions are never stamped 4, so a release that reads 3 reads them
//!   all and dead-letters only a probe.
//!
//! A consumer that meets a version above [`FORMAT`] never applies it: it
//! dead-letters the message with the reason, and `stockd dlq replay` hands
//! it on once a consumer that reads it runs (upgrade consumers first).

use lapin::types::{AMQPValue, FieldTable};
use lapin::BasicProperties;

/// The header that carries the version.
pub const FORMAT_HEADER: &str = "x-stockd-format";

/// The newest format this release writes and reads.
pub const FORMAT: u32 = 4;

/// The format before owners: what a message that names no client is.
const FORMAT_WITHOUT_CLIENTS: u32 = 2;

/// The newest format a deduction needs (a message naming its client).
const FORMAT_WITH_CLIENTS: u32 = 3;

/// The version a message carrying `msgs` needs: 3 when one names its
/// client, else the format before owners.
pub fn of_deductions(msgs: &[crate::domain::Deduction]) -> u32 {
    if msgs.iter().any(|m| m.client.is_some()) {
        FORMAT_WITH_CLIENTS
    } else {
        FORMAT_WITHOUT_CLIENTS
    }
}

/// Adds `version` (from [`of_deductions`]) to `headers`.
pub fn stamp(headers: &mut FieldTable, version: u32) {
    headers.insert(FORMAT_HEADER.into(), AMQPValue::LongUInt(version));
}

/// The version a delivery says it has (1 when it says none).
pub fn of(props: &BasicProperties) -> u64 {
    let value = props
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get(FORMAT_HEADER).cloned());
    match value {
        None => 1,
        Some(AMQPValue::LongUInt(v)) => u64::from(v),
        Some(AMQPValue::LongLongInt(v)) => u64::try_from(v).unwrap_or(u64::MAX),
        Some(AMQPValue::LongInt(v)) => u64::try_from(v).unwrap_or(u64::MAX),
        Some(AMQPValue::ShortUInt(v)) => u64::from(v),
        Some(AMQPValue::ShortShortUInt(v)) => u64::from(v),
        // A version this release cannot even read as a number is not one it knows.
        Some(_) => u64::MAX,
    }
}

/// `Err` with the dead-letter reason when this release cannot read `version`.
pub fn check(version: u64) -> Result<(), String> {
    if version <= u64::from(FORMAT) {
        return Ok(());
    }
    Err(format!(
        "format: version {version} is newer than this consumer reads ({FORMAT}); upgrade the \
         consumers, then `stockd dlq replay`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(value: Option<AMQPValue>) -> BasicProperties {
        let mut headers = FieldTable::default();
        if let Some(value) = value {
            headers.insert(FORMAT_HEADER.into(), value);
        }
        BasicProperties::default().with_headers(headers)
    }

    #[test]
    fn a_message_without_the_header_is_version_1_and_newer_ones_are_refused() {
        assert_eq!(of(&BasicProperties::default()), 1);
        assert_eq!(of(&with(None)), 1);
        let mut stamped = FieldTable::default();
        stamp(&mut stamped, FORMAT);
        let stamped = BasicProperties::default().with_headers(stamped);
        assert_eq!(of(&stamped), u64::from(FORMAT));
        assert!(check(of(&stamped)).is_ok());
        assert!(check(1).is_ok());
        let newer = of(&with(Some(AMQPValue::LongLongInt(i64::from(FORMAT) + 1))));
        let refused = check(newer).unwrap_err();
        assert!(
            refused.contains(&format!("version {}", FORMAT + 1)),
            "{refused}"
        );
        assert!(check(of(&with(Some(AMQPValue::Boolean(true))))).is_err());
    }
}
