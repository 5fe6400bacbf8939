//! JSON bodies of the API: what clients send (validated, unknown fields refused)
//! and what they get back.

use serde::{Deserialize, Serialize};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::problem::ApiError;
use crate::domain::{RequestId, Reservation, UserId};

/// `POST /v1/skus/{sku_id}/reservations`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReserveBody {
    pub request_id: RequestId,
    pub user_id: u64,
    pub count: i64,
}

impl ReserveBody {
    /// Checks ranges serde cannot; returns the validated user id and count.
    pub fn validate(&self, max_count: u32) -> Result<(UserId, u32), ApiError> {
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

/// `PUT /v1/admin/skus/{sku_id}`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkuBody {
    pub total_stock: i64,
    pub limit_per_user: i64,
}

/// Largest stock one SKU may hold; keeps every sum far from overflow.
pub const TOTAL_STOCK_MAX: i64 = 1_000_000_000_000;
/// Largest per-user limit (a reservation takes at most 1,000 units).
pub const LIMIT_PER_USER_MAX: i64 = 1_000_000;

impl SkuBody {
    pub fn validate(&self) -> Result<(i64, u32), ApiError> {
        if !(0..=TOTAL_STOCK_MAX).contains(&self.total_stock) {
            return Err(ApiError::InvalidRequest(format!(
                "total_stock must be in 0..={TOTAL_STOCK_MAX}"
            )));
        }
        if !(1..=LIMIT_PER_USER_MAX).contains(&self.limit_per_user) {
            return Err(ApiError::InvalidRequest(format!(
                "limit_per_user must be in 1..={LIMIT_PER_USER_MAX}"
            )));
        }
        Ok((self.total_stock, self.limit_per_user as u32))
    }
}

/// A reservation as the API shows it (SPEC §6).
#[derive(Debug, Serialize)]
pub struct ReservationView {
    pub request_id: String,
    pub sku_id: u64,
    pub user_id: u64,
    pub count: u32,
    pub status: &'static str,
    pub expires_at: String,
    /// Only on `GET`: whether the reservation is in MySQL yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persisted: Option<bool>,
}

impl ReservationView {
    pub fn new(r: &Reservation, persisted: Option<bool>) -> Self {
        Self {
            request_id: r.request_id.to_string(),
            sku_id: r.sku_id.get(),
            user_id: r.user_id.get(),
            count: r.count,
            status: r.status.as_str(),
            expires_at: rfc3339_ms(r.expires_at_ms),
            persisted,
        }
    }
}

/// `GET /v1/skus/{sku_id}`
#[derive(Debug, Serialize)]
pub struct SkuView {
    pub sku_id: u64,
    pub available: i64,
    pub sold_out: bool,
    pub limit_per_user: u64,
}

/// Formats milliseconds since the epoch as RFC 3339 (UTC, millisecond precision).
pub fn rfc3339_ms(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_ms(1_500), "1970-01-01T00:00:01.5Z");
    }

    #[test]
    fn counts_outside_1_to_max_are_invalid() {
        for count in [0, -1, 1001, i64::MAX] {
            let body = ReserveBody {
                request_id: RequestId::parse("r").unwrap(),
                user_id: 1,
                count,
            };
            assert!(body.validate(1000).is_err(), "{count}");
        }
    }
}
