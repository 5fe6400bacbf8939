//! The deduction: everything one reservation took from stock, so any store can
//! apply it without asking another. Redis writes it into the outbox, the broker
//! carries it, MySQL records it in the ledger; it lives here so those adapters
//! share a value instead of importing each other.

use serde::{Deserialize, Serialize};

use super::{OrderLines, RequestId, Reservation, SkuId, UserId, CLIENT_NAME_MAX_LEN};

/// Most units one reservation may take (contract §6: `count` is 1..=1000). The
/// config's `reservation.max_count`, the wire check and the API schema all use it.
pub const COUNT_MAX: u32 = 1000;

/// One applied-or-to-apply deduction. Its serde form is the deduction message's
/// wire format (see `mq::message`), hence `deny_unknown_fields`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deduction {
    pub request_id: RequestId,
    pub sku_id: SkuId,
    pub user_id: UserId,
    pub count: u32,
    /// Reservation time, Redis clock, ms since epoch.
    pub created_ms: u64,
    /// Time after which an unpaid reservation is released, ms since epoch.
    pub expires_ms: u64,
    /// Set when this deduction is one line of an order (its `request_id` is
    /// the order id): every line of the order, this one included, so whoever
    /// holds one line's deduction knows the whole order (`domain::order`).
    /// Absent on the wire for a single reservation, so a single's message is
    /// what it always was; a consumer that does not know the field refuses
    /// an order's message whole (`deny_unknown_fields`) and never applies
    /// part of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<OrderLines>,
    /// The client that made the hold (`auth.required`, contract §6.2), for
    /// the ledger row's `client`. Absent on the wire without one, so such a
    /// message is what it was before owners; a message that carries it is
    /// format 3 (`mq::format`), which a consumer before owners refuses whole
    /// (`deny_unknown_fields`) rather than apply without the owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// A request id Redis admitted twice: the ledger already holds a row for it
/// (the first admission), so the second deduction is not applied and Redis
/// must give back what it took the second time (see `redis::readmit`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readmission {
    pub msg: Deduction,
    pub row_created_ms: u64,
    pub row_expires_ms: u64,
}

impl Deduction {
    /// The deductions of every line of an order, in SKU order: one per line,
    /// each carrying the whole line list.
    pub fn of_order(
        order_id: &RequestId,
        user_id: UserId,
        lines: &OrderLines,
        created_ms: u64,
        expires_ms: u64,
    ) -> Vec<Self> {
        Self::of_order_by(order_id, user_id, lines, created_ms, expires_ms, None)
    }

    /// [`Self::of_order`] of an order `client` placed (none: of no one).
    pub fn of_order_by(
        order_id: &RequestId,
        user_id: UserId,
        lines: &OrderLines,
        created_ms: u64,
        expires_ms: u64,
        client: Option<&str>,
    ) -> Vec<Self> {
        lines
            .lines()
            .iter()
            .map(|line| Self {
                request_id: order_id.clone(),
                sku_id: line.sku_id,
                user_id,
                count: line.count,
                created_ms,
                expires_ms,
                order: Some(lines.clone()),
                client: client.map(str::to_string),
            })
            .collect()
    }

    /// Whether the client's name, if any, is one a hold records (1..=
    /// [`CLIENT_NAME_MAX_LEN`] bytes); a deduction with another is poison.
    pub fn client_in_range(&self) -> bool {
        self.client
            .as_ref()
            .is_none_or(|c| (1..=CLIENT_NAME_MAX_LEN).contains(&c.len()))
    }

    /// Whether `count` is in 1..=[`COUNT_MAX`]; a deduction outside is poison.
    pub fn count_in_range(&self) -> bool {
        (1..=COUNT_MAX).contains(&self.count)
    }
}

impl From<&Reservation> for Deduction {
    fn from(r: &Reservation) -> Self {
        Self {
            request_id: r.request_id.clone(),
            sku_id: r.sku_id,
            user_id: r.user_id,
            count: r.count,
            created_ms: r.created_at_ms,
            expires_ms: r.expires_at_ms,
            order: None,
            client: r.client.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ReservationStatus;

    #[test]
    fn a_reservation_becomes_its_deduction() {
        let r = Reservation {
            request_id: RequestId::parse("r-1").unwrap(),
            sku_id: SkuId::new(1).unwrap(),
            user_id: UserId::new(2).unwrap(),
            count: 3,
            status: ReservationStatus::Reserved,
            created_at_ms: 10,
            expires_at_ms: 20,
            client: Some("orders".into()),
        };
        let d = Deduction::from(&r);
        assert_eq!((d.count, d.created_ms, d.expires_ms), (3, 10, 20));
        assert_eq!(d.request_id, r.request_id);
        assert_eq!(d.client.as_deref(), Some("orders"));
        assert!(d.count_in_range());
        assert!(!Deduction {
            count: COUNT_MAX + 1,
            ..d.clone()
        }
        .count_in_range());
        assert!(!Deduction { count: 0, ..d }.count_in_range());
    }
}
