//! JSON bodies of the hold routes, both URL families: what a client sends to
//! hold stock (one SKU's reservation, or an order of several SKUs, validated
//! into the domain's [`OrderLines`]: distinct SKUs, sorted) and the hold it
//! gets back. A reservation is a hold of one line shown by its `request_id`,
//! an order a hold of N lines shown by its `order_id`; the two JSON shapes
//! stay as contract §6 gives them, and [`HoldView`] is either.
//!
//! The `#[schema(...)]` attributes are the OpenAPI contract (`GET /openapi.json`);
//! the `validate` methods enforce the same ranges at run time.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::problem::ApiError;
use crate::clock::rfc3339_ms;
use crate::domain::{
    OrderLine, OrderLines, RequestId, Reservation, ReservationStatus, SkuId, UserId,
};

/// Pattern of a `request_id` (contract §6), as in `RequestId::parse`.
pub const REQUEST_ID_PATTERN: &str = "^[A-Za-z0-9_.:-]{1,64}$";

/// `POST /v1/skus/{sku_id}/reservations`
/// The OpenAPI `maximum` of `count` below is a literal (schema attributes take
/// no paths); this makes it fail to build when the domain limit moves.
const _: () = assert!(crate::domain::COUNT_MAX == 1000);

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReserveBody {
    /// The client's idempotency key: a retry with the same id, user and count
    /// replays the first answer.
    #[schema(value_type = String, min_length = 1, max_length = 64,
             pattern = "^[A-Za-z0-9_.:-]{1,64}$", example = "order-4711:1")]
    pub request_id: RequestId,
    #[schema(minimum = 1, maximum = 9223372036854775807_i64, example = 42)]
    pub user_id: u64,
    #[schema(minimum = 1, maximum = 1000, example = 1)]
    pub count: i64,
    /// An admission pass (a JWT a waiting room signed for this buyer and SKU,
    /// contract "Passes"): needed on a SKU that requires one; otherwise
    /// ignored.
    #[serde(default)]
    #[schema(nullable = false, max_length = 4096)]
    pub pass: Option<String>,
}

impl ReserveBody {
    /// Checks ranges serde cannot; returns the validated user id and count.
    pub fn validate(&self, max_count: u32) -> Result<(UserId, u32), ApiError> {
        pass_fits(self.pass.as_deref())?;
        let user =
            UserId::new(self.user_id).map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
        if self.count < 1 || self.count > i64::from(max_count) {
            return Err(ApiError::InvalidRequest(format!(
                "count must be in 1..={max_count}"
            )));
        }
        Ok((user, self.count as u32))
    }
}

/// Longest pass accepted in a body: a JWT of a few SKUs is far shorter; a
/// bound so a body cannot make the api hash megabytes.
pub const PASS_MAX_LEN: usize = 4096;

/// A `pass`, when given, is 1..=[`PASS_MAX_LEN`] bytes.
fn pass_fits(pass: Option<&str>) -> Result<(), ApiError> {
    match pass {
        Some(p) if p.is_empty() || p.len() > PASS_MAX_LEN => Err(ApiError::InvalidRequest(
            format!("pass must be 1..={PASS_MAX_LEN} characters"),
        )),
        _ => Ok(()),
    }
}

/// A reservation as the API shows it (contract §6).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Reservation)]
pub struct ReservationView {
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_.:-]{1,64}$")]
    pub request_id: String,
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub sku_id: u64,
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub user_id: u64,
    #[schema(minimum = 1, maximum = 1000)]
    pub count: u32,
    pub status: StatusView,
    /// When an unconfirmed reservation is released (RFC 3339, UTC).
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// Only on `GET`: whether the reservation is in MySQL yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub persisted: Option<bool>,
}

/// Where a reservation is in its lifecycle (contract §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[schema(as = ReservationStatus)]
pub enum StatusView {
    Reserved,
    Confirmed,
    Released,
    Rejected,
}

impl From<ReservationStatus> for StatusView {
    fn from(status: ReservationStatus) -> Self {
        match status {
            ReservationStatus::Reserved => Self::Reserved,
            ReservationStatus::Confirmed => Self::Confirmed,
            ReservationStatus::Released => Self::Released,
            ReservationStatus::Rejected => Self::Rejected,
        }
    }
}

impl ReservationView {
    pub fn new(r: &Reservation, persisted: Option<bool>) -> Self {
        Self {
            request_id: r.request_id.to_string(),
            sku_id: r.sku_id.get(),
            user_id: r.user_id.get(),
            count: r.count,
            status: r.status.into(),
            expires_at: rfc3339_ms(r.expires_at_ms),
            persisted,
        }
    }
}

/// `POST /v1/orders`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderBody {
    /// The client's idempotency key for the whole order: a retry with the
    /// same id, user and lines replays the first answer.
    #[schema(value_type = String, min_length = 1, max_length = 64,
             pattern = "^[A-Za-z0-9_.:-]{1,64}$", example = "order-4711")]
    pub order_id: RequestId,
    #[schema(minimum = 1, maximum = 9223372036854775807_i64, example = 42)]
    pub user_id: u64,
    /// 1..=`orders.max_lines` lines (20 by default), each SKU once.
    #[schema(min_items = 1, max_items = 100)]
    pub lines: Vec<OrderLineBody>,
    /// An admission pass for this buyer naming every SKU of the order that
    /// requires one (contract "Passes"); otherwise ignored.
    #[serde(default)]
    #[schema(nullable = false, max_length = 4096)]
    pub pass: Option<String>,
}

/// One line of an order: a SKU and the units asked of it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrderLineBody {
    #[schema(minimum = 1, maximum = 9223372036854775807_i64, example = 1)]
    pub sku_id: u64,
    #[schema(minimum = 1, maximum = 1000, example = 1)]
    pub count: i64,
}

impl OrderBody {
    /// Checks what serde cannot: the buyer, each line's SKU and count
    /// (1..=`max_count`), and the list (1..=`max_lines`, distinct SKUs).
    pub fn validate(
        &self,
        max_lines: usize,
        max_count: u32,
    ) -> Result<(UserId, OrderLines), ApiError> {
        pass_fits(self.pass.as_deref())?;
        let invalid = |e: &dyn std::fmt::Display| ApiError::InvalidRequest(e.to_string());
        let user = UserId::new(self.user_id).map_err(|e| invalid(&e))?;
        let mut lines = Vec::with_capacity(self.lines.len());
        for line in &self.lines {
            let sku_id = SkuId::new(line.sku_id).map_err(|e| invalid(&e))?;
            if line.count < 1 || line.count > i64::from(max_count) {
                return Err(ApiError::InvalidRequest(format!(
                    "count of sku_id {sku_id} must be in 1..={max_count}"
                )));
            }
            lines.push(OrderLine {
                sku_id,
                count: line.count as u32,
            });
        }
        let lines = OrderLines::new(lines, max_lines).map_err(|e| invalid(&e))?;
        Ok((user, lines))
    }
}

/// An order as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Order)]
pub struct OrderView {
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_.:-]{1,64}$")]
    pub order_id: String,
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub user_id: u64,
    /// The whole order's state; every line is in the same one.
    pub status: StatusView,
    /// When an unconfirmed order is released (RFC 3339, UTC).
    #[schema(format = DateTime)]
    pub expires_at: String,
    /// The lines, sorted by `sku_id`.
    pub lines: Vec<OrderLineView>,
    /// Why a `REJECTED` or `RELEASED` order ended so (`INSUFFICIENT_STOCK`,
    /// `LIMIT_EXCEEDED`, `EXPIRED`, `CANCELLED`, ...); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reason: Option<String>,
    /// Only on `GET`: whether the order is in MySQL yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub persisted: Option<bool>,
}

/// One line of an order as shown.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrderLineView {
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub sku_id: u64,
    #[schema(minimum = 1, maximum = 1000)]
    pub count: u32,
}

impl OrderView {
    pub fn new(
        order_id: &RequestId,
        user_id: UserId,
        lines: &OrderLines,
        status: ReservationStatus,
        expires_at_ms: u64,
    ) -> Self {
        Self {
            order_id: order_id.to_string(),
            user_id: user_id.get(),
            status: status.into(),
            expires_at: rfc3339_ms(expires_at_ms),
            lines: lines
                .lines()
                .iter()
                .map(|l| OrderLineView {
                    sku_id: l.sku_id.get(),
                    count: l.count,
                })
                .collect(),
            reason: None,
            persisted: None,
        }
    }

    /// The view of an order row (MySQL decided it).
    pub fn of_row(row: &crate::db::orders::OrderRow) -> Self {
        Self {
            reason: row.reason.clone(),
            ..Self::new(
                &row.order_id,
                row.user_id,
                &row.lines,
                row.status,
                row.expires_at_ms,
            )
        }
    }
}

/// A hold as the API shows it, in its family's JSON shape.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum HoldView {
    Reservation(ReservationView),
    Order(OrderView),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(lines: &[(u64, i64)]) -> OrderBody {
        OrderBody {
            order_id: RequestId::parse("o-1").unwrap(),
            user_id: 7,
            lines: lines
                .iter()
                .map(|&(sku_id, count)| OrderLineBody { sku_id, count })
                .collect(),
            pass: None,
        }
    }

    #[test]
    fn a_valid_order_comes_out_sorted() {
        let (user, lines) = body(&[(3, 1), (1, 2)]).validate(20, 1000).unwrap();
        assert_eq!(user.get(), 7);
        assert_eq!(lines.encode(), "1:2,3:1");
    }

    #[test]
    fn empty_duplicate_oversized_and_out_of_range_orders_are_invalid() {
        let many: Vec<(u64, i64)> = (1..=3).map(|s| (s, 1)).collect();
        for (lines, max_lines) in [
            (vec![], 20),
            (vec![(1, 1), (1, 2)], 20),
            (many, 2),
            (vec![(1, 0)], 20),
            (vec![(1, 1001)], 20),
            (vec![(0, 1)], 20),
        ] {
            assert!(
                body(&lines).validate(max_lines, 1000).is_err(),
                "{lines:?} max {max_lines}"
            );
        }
    }

    #[test]
    fn counts_outside_1_to_max_are_invalid() {
        for count in [0, -1, 1001, i64::MAX] {
            let body = ReserveBody {
                request_id: RequestId::parse("r").unwrap(),
                user_id: 1,
                count,
                pass: None,
            };
            assert!(body.validate(1000).is_err(), "{count}");
        }
    }

    #[test]
    fn an_empty_or_oversized_pass_is_invalid() {
        for pass in [String::new(), "x".repeat(PASS_MAX_LEN + 1)] {
            let body = ReserveBody {
                request_id: RequestId::parse("r").unwrap(),
                user_id: 1,
                count: 1,
                pass: Some(pass),
            };
            assert!(body.validate(1000).is_err());
        }
    }
}
