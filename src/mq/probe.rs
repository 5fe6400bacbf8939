//! The warm-up's probe: a message that carries no deduction, published to the
//! deduct queue behind whatever is queued, so that its passing tells one SKU's
//! warm-up that every deduction published before it has been delivered —
//! without waiting for the whole queue to be empty while other SKUs sell
//! (contract §8.1).
//!
//! The queue is FIFO: when a consumer takes the probe, each message ahead of
//! it has been handed to a consumer. The consumer that takes it passes it
//! (`redis::Probes::pass`) once the batch it came in is settled, so the
//! deductions it held with it are in MySQL; the warm-up waits for that mark
//! and then reads MySQL.
//!
//! The probe is format 4 (`mq/format.rs`): a consumer of an earlier release
//! dead-letters it with the reason and applies nothing, and the warm-up that
//! sent it is refused when its wait runs out.

use lapin::types::{AMQPValue, FieldTable};
use lapin::BasicProperties;

/// The AMQP `type` property of a probe.
pub const KIND: &str = "stockd.warmup_probe";

/// The format a probe is stamped with (`mq/format.rs`).
pub const PROBE_FORMAT: u32 = 4;

/// The header naming the probe (its body says it too, for people reading a DLQ).
const PROBE_HEADER: &str = "x-stockd-probe";

/// The properties and body of the probe `id` (the publisher makes it
/// persistent, as every message it sends).
pub fn build(id: &str) -> (BasicProperties, Vec<u8>) {
    let mut headers = FieldTable::default();
    super::format::stamp(&mut headers, PROBE_FORMAT);
    headers.insert(PROBE_HEADER.into(), AMQPValue::LongString(id.into()));
    let props = BasicProperties::default()
        .with_message_id(format!("probe-{id}").into())
        .with_content_type("application/json".into())
        .with_type(KIND.into())
        .with_headers(headers);
    let body = serde_json::json!({ "warmup_probe": id }).to_string();
    (props, body.into_bytes())
}

/// The probe id a delivery carries, or `None` for any other message.
pub fn id_of(props: &BasicProperties) -> Option<String> {
    if props.kind().as_ref().map(|k| k.as_str()) != Some(KIND) {
        return None;
    }
    let headers = props.headers().as_ref()?;
    match headers.inner().get(PROBE_HEADER)? {
        AMQPValue::LongString(id) => Some(id.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_is_known_by_its_kind_and_a_deduction_is_not_a_probe() {
        let (props, body) = build("p-1");
        assert_eq!(id_of(&props).as_deref(), Some("p-1"));
        assert_eq!(super::super::format::of(&props), u64::from(PROBE_FORMAT));
        assert!(String::from_utf8(body).unwrap().contains("p-1"));
        assert_eq!(id_of(&BasicProperties::default()), None);
        let untyped = BasicProperties::default().with_type("other".into());
        assert_eq!(id_of(&untyped), None);
    }
}
