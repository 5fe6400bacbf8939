//! The CloudEvents 1.0 JSON format (structured mode) and how events share
//! broker messages: one event is `application/cloudevents+json`, several of
//! one type are a JSON array, `application/cloudevents-batch+json` — as
//! deductions already travel several to a message. Only events of one type
//! share a message, because the routing key is the type.

use serde::Serialize;

use super::{Event, EventData, EventType};

pub const CONTENT_TYPE: &str = "application/cloudevents+json";
pub const BATCH_CONTENT_TYPE: &str = "application/cloudevents-batch+json";

/// Events per broker message at most: a bound on a subscriber's memory
/// (~400 bytes an event, so ~200 KB a message).
pub const EVENTS_PER_MESSAGE_MAX: usize = 500;

/// The structured-mode envelope of an event, serialized straight from
/// borrowed fields: building a `serde_json::Value` map per event (and a deep
/// copy of its data) was most of the events' CPU in a profile of the
/// `orders` bench phase, six events an order. Fields are declared in
/// alphabetical order, the order a `Value` map writes them in, so the bytes
/// on the wire are what they were.
#[derive(Serialize)]
struct Envelope<'a> {
    data: &'a EventData,
    datacontenttype: &'static str,
    id: &'a str,
    source: &'a str,
    specversion: &'static str,
    subject: &'a str,
    time: String,
    #[serde(rename = "type")]
    kind: &'static str,
}

fn envelope<'a>(event: &'a Event, id: &'a str, source: &'a str) -> Envelope<'a> {
    Envelope {
        data: &event.data,
        datacontenttype: "application/json",
        id,
        source,
        specversion: "1.0",
        subject: &event.subject,
        time: crate::clock::rfc3339_ms(event.time_ms),
        kind: event.kind.as_str(),
    }
}

/// One broker message of events.
#[derive(Debug, Clone, PartialEq)]
pub struct EventMessage {
    /// The events' type.
    pub routing_key: &'static str,
    pub content_type: &'static str,
    /// The first event's id, with `+<n>` for a batch of n.
    pub message_id: String,
    pub body: Vec<u8>,
    /// How many events it carries.
    pub events: usize,
}

/// Cuts `events` (each with its final id) into messages: grouped by type in
/// the order each type first appears, at most [`EVENTS_PER_MESSAGE_MAX`] a message.
pub fn messages(events: &[(String, &Event)], source: &str) -> Vec<EventMessage> {
    let mut kinds: Vec<EventType> = Vec::new();
    for (_, e) in events {
        if !kinds.contains(&e.kind) {
            kinds.push(e.kind);
        }
    }
    let mut out = Vec::new();
    for kind in kinds {
        let of_kind: Vec<&(String, &Event)> =
            events.iter().filter(|(_, e)| e.kind == kind).collect();
        for chunk in of_kind.chunks(EVENTS_PER_MESSAGE_MAX) {
            out.push(message(kind, chunk, source));
        }
    }
    out
}

fn message(kind: EventType, chunk: &[&(String, &Event)], source: &str) -> EventMessage {
    let first_id = chunk[0].0.clone();
    if let [(id, event)] = chunk {
        let body = serde_json::to_vec(&envelope(event, id, source)).expect("JSON values serialize");
        return EventMessage {
            routing_key: kind.as_str(),
            content_type: CONTENT_TYPE,
            message_id: first_id,
            body,
            events: 1,
        };
    }
    let array: Vec<Envelope> = chunk
        .iter()
        .map(|(id, e)| envelope(e, id, source))
        .collect();
    EventMessage {
        routing_key: kind.as_str(),
        content_type: BATCH_CONTENT_TYPE,
        message_id: format!("{first_id}+{}", chunk.len()),
        body: serde_json::to_vec(&array).expect("JSON values serialize"),
        events: chunk.len(),
    }
}

/// The final id of an event staged as outbox row `seq`.
pub fn final_id(staged_id: &str, seq: u64) -> String {
    match staged_id.strip_suffix(super::SEQUENCED) {
        Some(head) => format!("{head}{}{seq}", super::SEQUENCED),
        None => staged_id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Deduction, RequestId, SkuId, UserId};
    use serde_json::Value;

    fn reservation(kind: EventType, id: &str) -> Event {
        let facts = Deduction {
            sku_id: SkuId::new(1).unwrap(),
            request_id: RequestId::parse(id).unwrap(),
            user_id: UserId::new(1).unwrap(),
            count: 1,
            created_ms: 0,
            expires_ms: 0,
            order: None,
            client: None,
        };
        Event::reservation(kind, &facts, Some(1), None, 1_700_000_000_123)
    }

    #[test]
    fn an_envelope_writes_the_bytes_a_json_map_of_its_fields_writes() {
        let event = reservation(EventType::Persisted, "a");
        let as_map = serde_json::json!({
            "specversion": "1.0",
            "id": "the-id",
            "source": "/stockd",
            "type": "stockd.reservation.persisted",
            "time": "2023-11-14T22:13:20.123Z",
            "subject": event.subject,
            "datacontenttype": "application/json",
            "data": event.data.to_json(),
        });
        let direct = serde_json::to_vec(&envelope(&event, "the-id", "/stockd")).unwrap();
        assert_eq!(
            String::from_utf8(direct).unwrap(),
            serde_json::to_string(&as_map).unwrap()
        );
    }

    #[test]
    fn events_share_a_message_only_with_their_own_type() {
        let a = reservation(EventType::Persisted, "a");
        let b = reservation(EventType::Confirmed, "b");
        let c = reservation(EventType::Persisted, "c");
        let with_ids: Vec<(String, &Event)> = [&a, &b, &c]
            .into_iter()
            .map(|e| (e.id.clone(), e))
            .collect();
        let out = messages(&with_ids, "/stockd");
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].routing_key, "stockd.reservation.persisted");
        assert_eq!(out[0].content_type, BATCH_CONTENT_TYPE);
        assert_eq!(out[0].message_id, "skus/1/reservations/a#persisted+2");
        let array: Vec<Value> = serde_json::from_slice(&out[0].body).unwrap();
        assert_eq!(array.len(), 2);
        assert_eq!(array[1]["id"], "skus/1/reservations/c#persisted");
        assert_eq!(out[1].content_type, CONTENT_TYPE);
        let one: Value = serde_json::from_slice(&out[1].body).unwrap();
        assert_eq!(one["specversion"], "1.0");
        assert_eq!(one["type"], "stockd.reservation.confirmed");
        assert_eq!(one["time"], "2023-11-14T22:13:20.123Z");
        assert_eq!(one["datacontenttype"], "application/json");
        assert_eq!(one["source"], "/stockd");
    }

    #[test]
    fn a_sequenced_id_is_completed_by_its_row_and_others_are_kept() {
        assert_eq!(final_id("skus/1#sold_out@", 42), "skus/1#sold_out@42");
        assert_eq!(
            final_id("skus/1/reservations/a#released", 42),
            "skus/1/reservations/a#released"
        );
    }
}
