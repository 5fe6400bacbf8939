//! Events out: what became of reservations and stock, told to the rest of the
//! platform as CloudEvents 1.0 on the durable topic exchange `<prefix>events`
//! (docs/operations.md, "Events"; the AsyncAPI document docs/asyncapi.json).
//!
//! Why three ways out:
//! - a change MySQL decides (a confirm, a release, a movement of stock, a
//!   SKU's crossing, a reconciler's finding) is staged as a row of the
//!   `event_outbox` table **in the transaction that makes the change**
//!   (`db::event_outbox`), and the event relay (`outbox::event_relay`)
//!   publishes committed rows with confirms: an event is emitted only once
//!   its change is committed, and is never lost once it is;
//! - the consumer's deductions (`persisted`, `rejected`: one per
//!   reservation, the bulk of all events) are published by the consumer after
//!   its commit and before its ack. The ledger's idempotency is their outbox:
//!   a batch not told is not acked, comes back, and its duplicates are told
//!   again from their ledger rows (`BatchReport::told`) — no table row per
//!   reservation, which cost MariaDB a fifth more CPU per reservation;
//! - a reservation Redis admitted (`reserved`) travels with its deduction: the
//!   outbox group commit publishes both and removes the outbox entry only when
//!   both are confirmed, and the Redis outbox relay republishes both
//!   (`outbox::group`). A refusal writes no outbox entry, so it has no event.
//!
//! Delivery is at least once. An event's `id` names the change, not the
//! delivery: the same change always has the same id ([`Event::id`]), so a
//! subscriber deduplicates redeliveries by id.

pub mod cloud;
pub mod data;
pub mod filter;
pub mod outgoing;

use serde_json::Value;

use crate::domain::{Deduction, ReservationStatus, SkuId};
use crate::domain::{OrderLines, RequestId, UserId};

pub use data::{EventData, OrderData, OrderLineData, ReservationData};
pub use filter::EventPolicy;
pub use outgoing::Outgoing;

/// Every event type stockd publishes; the routing key of a message equals it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    Reserved,
    Persisted,
    Confirmed,
    Released,
    Rejected,
    OrderReserved,
    OrderPersisted,
    OrderConfirmed,
    OrderReleased,
    OrderRejected,
    SoldOut,
    BackInStock,
    LowStock,
    Adjusted,
    Drift,
    Repaired,
    SaleWarmed,
    SaleOpened,
    SaleClosed,
}

impl EventType {
    pub const ALL: [EventType; 19] = [
        Self::Reserved,
        Self::Persisted,
        Self::Confirmed,
        Self::Released,
        Self::Rejected,
        Self::OrderReserved,
        Self::OrderPersisted,
        Self::OrderConfirmed,
        Self::OrderReleased,
        Self::OrderRejected,
        Self::SoldOut,
        Self::BackInStock,
        Self::LowStock,
        Self::Adjusted,
        Self::Drift,
        Self::Repaired,
        Self::SaleWarmed,
        Self::SaleOpened,
        Self::SaleClosed,
    ];

    /// The CloudEvents `type` (and the AMQP routing key).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "stockd.reservation.reserved",
            Self::Persisted => "stockd.reservation.persisted",
            Self::Confirmed => "stockd.reservation.confirmed",
            Self::Released => "stockd.reservation.released",
            Self::Rejected => "stockd.reservation.rejected",
            Self::OrderReserved => "stockd.order.reserved",
            Self::OrderPersisted => "stockd.order.persisted",
            Self::OrderConfirmed => "stockd.order.confirmed",
            Self::OrderReleased => "stockd.order.released",
            Self::OrderRejected => "stockd.order.rejected",
            Self::SoldOut => "stockd.sku.sold_out",
            Self::BackInStock => "stockd.sku.back_in_stock",
            Self::LowStock => "stockd.sku.low_stock",
            Self::Adjusted => "stockd.sku.adjusted",
            Self::Drift => "stockd.reconcile.drift",
            Self::Repaired => "stockd.reconcile.repaired",
            Self::SaleWarmed => "stockd.sku.sale_warmed",
            Self::SaleOpened => "stockd.sku.sale_opened",
            Self::SaleClosed => "stockd.sku.sale_closed",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }

    /// The order's type of the same change as a reservation's `self`
    /// (`Persisted` → `OrderPersisted`); other types are their own.
    pub fn of_order(self) -> Self {
        match self {
            Self::Reserved => Self::OrderReserved,
            Self::Persisted => Self::OrderPersisted,
            Self::Confirmed => Self::OrderConfirmed,
            Self::Released => Self::OrderReleased,
            Self::Rejected => Self::OrderRejected,
            other => other,
        }
    }

    /// The last word of the type: the change an id names (`…#persisted`).
    pub fn word(self) -> &'static str {
        let full = self.as_str();
        full.rsplit('.').next().unwrap_or(full)
    }
}

/// Appended to the id of an event that can happen many times to one subject
/// (a SKU sold out, back in stock, sold out again): the publisher replaces it
/// with `@<seq>`, the event's `event_outbox` row number, fixed at the commit
/// that staged it and so the same on every redelivery.
pub const SEQUENCED: char = '@';

/// What an order event tells of the order itself (its lines come with each
/// line's available, [`Event::order`]).
#[derive(Debug, Clone, Copy)]
pub struct OrderFacts<'a> {
    pub order_id: &'a RequestId,
    pub user_id: UserId,
    pub lines: &'a OrderLines,
    pub created_ms: u64,
    pub expires_ms: u64,
}

impl<'a> OrderFacts<'a> {
    /// The order a line's deduction names (`None`: a single reservation).
    pub fn of_line(line: &'a Deduction) -> Option<Self> {
        Some(Self {
            order_id: &line.request_id,
            user_id: line.user_id,
            lines: line.order.as_ref()?,
            created_ms: line.created_ms,
            expires_ms: line.expires_ms,
        })
    }
}

/// One event, before its envelope (`cloud`) is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: EventType,
    /// Stable: the same change always has the same id. Ends with
    /// [`SEQUENCED`] when the outbox row number completes it.
    pub id: String,
    pub subject: String,
    pub time_ms: u64,
    pub data: EventData,
}

impl Event {
    /// A reservation's change: `kind` is one of the five reservation types;
    /// `available` the SKU's available after it (`None`: unknown, only for
    /// `reserved` republished from the outbox); `reason` for a release or a
    /// rejection (stored upper case in the ledger, lower case on the wire).
    pub fn reservation(
        kind: EventType,
        facts: &Deduction,
        available: Option<i64>,
        reason: Option<&str>,
        time_ms: u64,
    ) -> Self {
        let status = status_after(kind);
        let subject = format!(
            "skus/{}/reservations/{}",
            facts.sku_id.get(),
            facts.request_id
        );
        let data = EventData::Reservation(ReservationData {
            available: available.map(|a| a.max(0)),
            count: facts.count,
            expires_at_ms: facts.expires_ms,
            reason: reason.map(str::to_ascii_lowercase),
            request_id: facts.request_id.as_str().to_string(),
            reserved_at_ms: facts.created_ms,
            sku_id: facts.sku_id.get(),
            status: status.as_str(),
            user_id: facts.user_id.get(),
        });
        Self::of_change(kind, subject, time_ms, data)
    }

    /// The event of a change that happens once to its subject: named by the
    /// subject and the change (`<subject>#<word>`).
    fn of_change(kind: EventType, subject: String, time_ms: u64, data: EventData) -> Self {
        Self {
            kind,
            id: format!("{subject}#{}", kind.word()),
            subject,
            time_ms,
            data,
        }
    }

    /// A whole order's change, told once for all its lines (`stockd.order.*`,
    /// never a `stockd.reservation.*` event per line): `kind` is one of the
    /// five reservation types, told as its order type ([`EventType::of_order`]).
    /// `available` gives each line's SKU available after the change (`None`:
    /// unknown, as for a `reserved` event republished from the outbox);
    /// `failed` the line (SKU) that failed a rejected order.
    pub fn order(
        kind: EventType,
        facts: &OrderFacts<'_>,
        available: impl Fn(SkuId) -> Option<i64>,
        reason: Option<&str>,
        failed: Option<SkuId>,
        time_ms: u64,
    ) -> Self {
        let status = status_after(kind);
        let kind = kind.of_order();
        let subject = format!("orders/{}", facts.order_id);
        let lines = (facts.lines.lines().iter())
            .map(|line| OrderLineData {
                available: available(line.sku_id).map(|a| a.max(0)),
                count: line.count,
                sku_id: line.sku_id.get(),
            })
            .collect();
        let data = EventData::Order(OrderData {
            expires_at_ms: facts.expires_ms,
            failed_sku_id: failed.map(SkuId::get),
            lines,
            order_id: facts.order_id.as_str().to_string(),
            reason: reason.map(str::to_ascii_lowercase),
            reserved_at_ms: facts.created_ms,
            status: status.as_str(),
            user_id: facts.user_id.get(),
        });
        Self::of_change(kind, subject, time_ms, data)
    }

    /// A SKU-wide event that may happen again (stock crossings, reconciler
    /// findings): its id is completed by the outbox row number.
    pub fn sku(kind: EventType, sku_id: SkuId, data: Value, time_ms: u64) -> Self {
        let subject = format!("skus/{}", sku_id.get());
        Self {
            kind,
            id: format!("{subject}#{}{SEQUENCED}", kind.word()),
            subject,
            time_ms,
            data: data.into(),
        }
    }

    /// A moment of a SKU's sale window (opened, closed): named by the
    /// moment it is about (`skus/7#sale_opened@<opens_ms>`), so a window
    /// moved before it opens is a new change, and the same opening told
    /// again is the same id.
    pub fn sale(kind: EventType, sku_id: SkuId, at_ms: i64, data: Value, time_ms: u64) -> Self {
        let subject = format!("skus/{}", sku_id.get());
        Self {
            kind,
            id: format!("{subject}#{}@{at_ms}", kind.word()),
            subject,
            time_ms,
            data: data.into(),
        }
    }

    /// A movement of stock (create, restock, adjustment): named by its
    /// `stock_movements` row.
    pub fn adjusted(sku_id: SkuId, movement_id: u64, data: Value, time_ms: u64) -> Self {
        let subject = format!("skus/{}", sku_id.get());
        Self {
            kind: EventType::Adjusted,
            id: format!("{subject}/movements/{movement_id}#adjusted"),
            subject,
            time_ms,
            data: data.into(),
        }
    }
}

/// The status a reservation or an order has after a change of `kind` (one
/// of the five reservation types).
fn status_after(kind: EventType) -> ReservationStatus {
    match kind {
        EventType::Confirmed => ReservationStatus::Confirmed,
        EventType::Released => ReservationStatus::Released,
        EventType::Rejected => ReservationStatus::Rejected,
        _ => ReservationStatus::Reserved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts() -> Deduction {
        Deduction {
            sku_id: SkuId::new(7).unwrap(),
            request_id: crate::domain::RequestId::parse("r-1").unwrap(),
            user_id: crate::domain::UserId::new(42).unwrap(),
            count: 2,
            created_ms: 10,
            expires_ms: 20,
            order: None,
            client: None,
        }
    }

    #[test]
    fn a_reservation_event_is_named_by_its_subject_and_change() {
        let e = Event::reservation(EventType::Released, &facts(), Some(5), Some("EXPIRED"), 1);
        assert_eq!(e.id, "skus/7/reservations/r-1#released");
        assert_eq!(e.subject, "skus/7/reservations/r-1");
        assert_eq!(e.data.to_json()["status"], "RELEASED");
        assert_eq!(e.data.to_json()["reason"], "expired");
        assert_eq!(e.data.to_json()["available"], 5);
        let again = Event::reservation(EventType::Released, &facts(), Some(9), Some("EXPIRED"), 2);
        assert_eq!(again.id, e.id, "the same change has the same id");
        let reserved = Event::reservation(EventType::Reserved, &facts(), None, None, 1);
        assert!(reserved.data.to_json().get("available").is_none());
        assert!(reserved.data.to_json().get("reason").is_none());
        assert_eq!(reserved.data.to_json()["status"], "RESERVED");
    }

    #[test]
    fn an_order_event_tells_every_line_under_the_order() {
        let lines = OrderLines::decode("7:2,9:1").unwrap();
        let order_id = RequestId::parse("o-1").unwrap();
        let order = OrderFacts {
            order_id: &order_id,
            user_id: UserId::new(42).unwrap(),
            lines: &lines,
            created_ms: 10,
            expires_ms: 20,
        };
        let available = |sku: SkuId| (sku.get() == 7).then_some(5);
        let nine = SkuId::new(9).ok();
        let e = Event::order(
            EventType::Rejected,
            &order,
            available,
            Some("OVER_ADMITTED"),
            nine,
            1,
        );
        assert_eq!(e.kind, EventType::OrderRejected);
        assert_eq!(e.id, "orders/o-1#rejected");
        assert_eq!(e.subject, "orders/o-1");
        assert_eq!(
            e.data.to_json(),
            json!({"expires_at_ms": 20, "failed_sku_id": 9, "order_id": "o-1",
                   "reason": "over_admitted", "reserved_at_ms": 10, "status": "REJECTED",
                   "user_id": 42, "lines": [{"sku_id": 7, "count": 2, "available": 5},
                                            {"sku_id": 9, "count": 1}]})
        );
        let reserved = Event::order(EventType::Reserved, &order, |_| None, None, None, 1);
        assert_eq!(reserved.kind.as_str(), "stockd.order.reserved");
        let data = reserved.data.to_json();
        assert!(data.get("reason").is_none() && data.get("failed_sku_id").is_none());
        assert_eq!(data["status"], "RESERVED");
        assert!(
            OrderFacts::of_line(&facts()).is_none(),
            "a single reservation"
        );
    }

    #[test]
    fn every_type_parses_back_and_names_its_change() {
        for kind in EventType::ALL {
            assert_eq!(EventType::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(EventType::SoldOut.word(), "sold_out");
        assert_eq!(EventType::parse("stockd.nothing"), None);
        let e = Event::sku(EventType::SoldOut, SkuId::new(3).unwrap(), json!({}), 0);
        assert_eq!(e.id, "skus/3#sold_out@");
        let opened = Event::sale(
            EventType::SaleOpened,
            SkuId::new(3).unwrap(),
            1_000,
            json!({}),
            5,
        );
        assert_eq!(opened.id, "skus/3#sale_opened@1000", "named by the opening");
        assert_eq!(crate::events::cloud::final_id(&opened.id, 42), opened.id);
    }
}
