//! An event's `data`: a reservation's or an order's facts as a typed
//! struct, everything else as a JSON value.
//!
//! Why typed for reservations and orders: they are the bulk of all events
//! (two per reservation or order), and building a `serde_json::Value`
//! map for each (a key string and a value node per field, then a walk to
//! serialize it and another to drop it) was most of what events cost the
//! api and the consumer in a profile of the `orders` bench phase. The
//! struct serializes straight to the same bytes: its fields are declared in
//! alphabetical order, the order a `Value` map writes its keys in (unit test
//! below), so subscribers see exactly what they saw before.

use serde::Serialize;
use serde_json::Value;

/// The `data` member of an event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EventData {
    Reservation(ReservationData),
    Order(OrderData),
    Json(Value),
}

impl EventData {
    /// As a JSON value, for the tests that index into an event's data.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Json(value) => value.clone(),
            Self::Reservation(r) => serde_json::to_value(r).expect("plain fields serialize"),
            Self::Order(o) => serde_json::to_value(o).expect("plain fields serialize"),
        }
    }
}

impl From<Value> for EventData {
    fn from(value: Value) -> Self {
        Self::Json(value)
    }
}

/// A reservation's change, as `stockd.reservation.*` events carry it
/// (docs/asyncapi.json). Fields in alphabetical order: see the module doc.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReservationData {
    /// The SKU's available after the change; absent when unknown (a
    /// `reserved` event republished from an outbox entry of a release
    /// that did not keep it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<i64>,
    pub count: u32,
    pub expires_at_ms: u64,
    /// Why a release or a rejection happened, lower case.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub request_id: String,
    pub reserved_at_ms: u64,
    pub sku_id: u64,
    pub status: &'static str,
    pub user_id: u64,
}

/// A whole order's change, as `stockd.order.*` events carry it
/// (docs/asyncapi.json): one event for every line. Fields in alphabetical
/// order, as [`ReservationData`]'s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderData {
    pub expires_at_ms: u64,
    /// The SKU of the line that could not be applied (a rejected order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_sku_id: Option<u64>,
    /// Every line, in SKU order.
    pub lines: Vec<OrderLineData>,
    pub order_id: String,
    /// Why a release or a rejection happened, lower case.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub reserved_at_ms: u64,
    pub status: &'static str,
    pub user_id: u64,
}

/// One line of an order event: its SKU, units and the SKU's available after
/// the change (absent when unknown: a `reserved` event republished from the
/// outbox).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderLineData {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<i64>,
    pub count: u32,
    pub sku_id: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn data(available: Option<i64>, reason: Option<&str>) -> ReservationData {
        ReservationData {
            available,
            count: 2,
            expires_at_ms: 20,
            reason: reason.map(str::to_string),
            request_id: "r-1".to_string(),
            reserved_at_ms: 10,
            sku_id: 7,
            status: "RELEASED",
            user_id: 42,
        }
    }

    #[test]
    fn typed_reservation_data_writes_the_bytes_of_a_json_map() {
        for (available, reason) in [(Some(5), Some("expired")), (None, None), (Some(0), None)] {
            let mut map = json!({
                "sku_id": 7,
                "request_id": "r-1",
                "user_id": 42,
                "count": 2,
                "status": "RELEASED",
                "reserved_at_ms": 10,
                "expires_at_ms": 20,
            });
            if let Some(a) = available {
                map["available"] = json!(a);
            }
            if let Some(r) = reason {
                map["reason"] = json!(r);
            }
            let typed = EventData::Reservation(data(available, reason));
            assert_eq!(
                serde_json::to_string(&typed).unwrap(),
                serde_json::to_string(&map).unwrap()
            );
            assert_eq!(typed.to_json(), map);
        }
    }

    #[test]
    fn json_data_is_written_as_it_is() {
        let value = json!({"total": 10, "available": 3});
        let data = EventData::from(value.clone());
        assert_eq!(
            serde_json::to_string(&data).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
    }
}
