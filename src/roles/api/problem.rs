//! Every error the HTTP API answers, as RFC 9457 `application/problem+json` with a
//! stable `code`. This table is the contract of contract §6: a client switches on
//! `code`, never on the human-readable `detail`.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde_json::json;

/// Seconds a client should wait before retrying a 503.
pub const RETRY_AFTER_SECS: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidRequest(String),
    #[error("authorization required")]
    Unauthorized,
    /// A public route without a known client (`auth.required`).
    #[error("authentication required: send Authorization: Bearer <client token>")]
    Unauthenticated,
    /// A known client without the route's scope (carried).
    #[error("this client lacks scope `{0}`")]
    Forbidden(&'static str),
    #[error("SKU {0} not found")]
    SkuNotFound(u64),
    #[error("reservation not found")]
    ReservationNotFound,
    #[error("order not found")]
    OrderNotFound,
    #[error("the SKU is sold out")]
    SoldOut,
    #[error("only {available} units left")]
    InsufficientStock { available: u64 },
    #[error("per-user limit {limit} reached ({bought} held)")]
    LimitExceeded { bought: u64, limit: u64 },
    /// The buyer's holds on the SKU that lapsed unpaid reached
    /// `limits.max_lapsed_holds` (carried: the count and the cap).
    #[error("{lapsed} holds of this buyer on this SKU lapsed unpaid; at most {max} may")]
    LapseLimit { lapsed: u64, max: u64 },
    /// The buyer's live units and the hold would exceed
    /// `limits.buyer_max_live_units` (carried: the live units and the budget).
    #[error("this buyer holds {live} live units; the hold budget is {budget}")]
    HoldBudgetExceeded { live: u64, budget: u64 },
    /// The SKU's sale opens at `opens_at_ms` (carried, with the wait the
    /// `Retry-After` tells; docs/contract.md §19).
    #[error("the sale of this SKU has not started; it opens at {}", crate::clock::rfc3339_ms(*opens_at_ms as u64))]
    SaleNotStarted {
        opens_at_ms: i64,
        retry_after_secs: u64,
    },
    /// The SKU's sale window closed.
    #[error("the sale of this SKU has ended")]
    SaleEnded,
    /// The SKU requires a pass and the hold carries none.
    #[error("this SKU requires a pass: send one in `pass`")]
    PassRequired,
    /// A change of a sale that has opened: its opening cannot move, nor its
    /// window be removed (carried: what was asked).
    #[error("{0}")]
    SaleOpen(String),
    #[error("request_id was used with another user or count")]
    IdempotencyMismatch,
    /// The id names another client's hold (contract §6.2): nothing of it is told.
    #[error("this id is already taken; send a new one")]
    IdTaken,
    #[error("the reservation was released")]
    ReservationReleased,
    #[error("the reservation is confirmed")]
    ReservationConfirmed,
    #[error("the reservation was rejected")]
    ReservationRejected,
    /// The reservation is a line of an order: only the whole order moves.
    #[error("this reservation is a line of an order: confirm, cancel or extend the order")]
    OrderLine,
    /// `reservation.max_extensions` used up (carried: the limit).
    #[error("the time to pay was extended {0} times already, the most allowed")]
    ExtensionLimit(u32),
    /// An order refused on one line: the line's SKU and the refusal
    /// (`SOLD_OUT`, `INSUFFICIENT_STOCK`, `LIMIT_EXCEEDED`, `LAPSE_LIMIT`,
    /// `SKU_NOT_FOUND`),
    /// whose code and status the answer takes, with a `line` member.
    #[error("order line sku_id {sku_id}: {refusal}")]
    OrderRefused { sku_id: u64, refusal: Box<ApiError> },
    #[error("{0}")]
    BelowReserved(String),
    #[error("{0}")]
    BucketsLocked(String),
    /// An adjustment's `expected_available` is not MySQL's available (carried).
    #[error("available is {current}, not the expected {expected}; read it again and retry")]
    Stale { expected: i64, current: i64 },
    /// An `adjustment_id` applied before with another body.
    #[error("{0}")]
    AdjustmentMismatch(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("too many requests; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    #[error("no such route")]
    RouteNotFound,
    /// Carries the `Allow` header value: the methods the route serves.
    #[error("method not allowed; this route serves {0}")]
    MethodNotAllowed(&'static str),
    /// A body without `Content-Type: application/json`.
    #[error("the body must be sent with Content-Type: application/json")]
    UnsupportedMediaType,
    /// The hold's admission pass did not verify (carried: which check).
    #[error("{0}")]
    PassInvalid(&'static str),
    /// The hold's admission pass is outside its time (carried: which end).
    #[error("{0}")]
    PassExpired(&'static str),
    /// The admission pass was used by another hold already.
    #[error("this pass was used by another hold; a pass buys once")]
    PassUsed,
    /// `POST /v1/passes` without `passes.issuer_key`.
    #[error("this node issues no pass: passes.issuer_key is not set")]
    PassesNotConfigured,
}

impl ApiError {
    /// The stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidRequest(_) => "INVALID_REQUEST",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::Forbidden(_) => "FORBIDDEN",
            Self::SkuNotFound(_) => "SKU_NOT_FOUND",
            Self::ReservationNotFound => "RESERVATION_NOT_FOUND",
            Self::OrderNotFound => "ORDER_NOT_FOUND",
            Self::SoldOut => "SOLD_OUT",
            Self::InsufficientStock { .. } => "INSUFFICIENT_STOCK",
            Self::LimitExceeded { .. } => "LIMIT_EXCEEDED",
            Self::LapseLimit { .. } => "LAPSE_LIMIT",
            Self::HoldBudgetExceeded { .. } => "HOLD_BUDGET_EXCEEDED",
            Self::SaleNotStarted { .. } => "SALE_NOT_STARTED",
            Self::SaleEnded => "SALE_ENDED",
            Self::PassRequired => "PASS_REQUIRED",
            Self::SaleOpen(_) => "SALE_OPEN",
            Self::IdempotencyMismatch => "IDEMPOTENCY_MISMATCH",
            Self::IdTaken => "ID_TAKEN",
            Self::ReservationReleased => "RESERVATION_RELEASED",
            Self::ReservationConfirmed => "RESERVATION_CONFIRMED",
            Self::ReservationRejected => "RESERVATION_REJECTED",
            Self::ExtensionLimit(_) => "EXTENSION_LIMIT",
            Self::OrderLine => "ORDER_LINE",
            Self::OrderRefused { refusal, .. } => refusal.code(),
            Self::BelowReserved(_) => "BELOW_RESERVED",
            Self::BucketsLocked(_) => "BUCKETS_LOCKED",
            Self::Stale { .. } => "STALE",
            Self::AdjustmentMismatch(_) => "IDEMPOTENCY_MISMATCH",
            Self::Conflict(_) => "CONFLICT",
            Self::Unavailable(_) => "UNAVAILABLE",
            Self::RateLimited { .. } => "RATE_LIMITED",
            Self::RouteNotFound => "NOT_FOUND",
            Self::MethodNotAllowed(_) => "METHOD_NOT_ALLOWED",
            Self::UnsupportedMediaType => "UNSUPPORTED_MEDIA_TYPE",
            Self::PassInvalid(_) => "PASS_INVALID",
            Self::PassExpired(_) => "PASS_EXPIRED",
            Self::PassUsed => "PASS_USED",
            Self::PassesNotConfigured => "PASSES_NOT_CONFIGURED",
        }
    }

    /// Reports an infrastructure failure to the outage log (one line per
    /// outage, a counter per request) and hides its details from the client.
    pub fn unavailable(what: &'static str, err: impl std::fmt::Display) -> Self {
        crate::health::outage::failed(what, &err);
        Self::Unavailable(format!("{what} is unavailable; retry shortly"))
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized | Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_)
            | Self::PassRequired
            | Self::PassInvalid(_)
            | Self::PassExpired(_) => StatusCode::FORBIDDEN,
            Self::SkuNotFound(_)
            | Self::ReservationNotFound
            | Self::OrderNotFound
            | Self::RouteNotFound => StatusCode::NOT_FOUND,
            Self::SoldOut
            | Self::InsufficientStock { .. }
            | Self::LimitExceeded { .. }
            | Self::LapseLimit { .. }
            | Self::HoldBudgetExceeded { .. }
            | Self::IdTaken
            | Self::SaleNotStarted { .. }
            | Self::SaleEnded
            | Self::SaleOpen(_)
            | Self::ReservationReleased
            | Self::ReservationConfirmed
            | Self::ReservationRejected
            | Self::ExtensionLimit(_)
            | Self::OrderLine
            | Self::BelowReserved(_)
            | Self::BucketsLocked(_)
            | Self::Stale { .. }
            | Self::Conflict(_)
            | Self::PassUsed => StatusCode::CONFLICT,
            Self::IdempotencyMismatch | Self::AdjustmentMismatch(_) => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Self::Unavailable(_) | Self::PassesNotConfigured => StatusCode::SERVICE_UNAVAILABLE,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::OrderRefused { refusal, .. } => refusal.status_code(),
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let mut body = json!({
            "type": "about:blank",
            "title": status.canonical_reason().unwrap_or("Error"),
            "status": status.as_u16(),
            "detail": self.to_string(),
            "code": self.code(),
        });
        if let Self::Stale { current, .. } = self {
            // The value to compare against next time (RFC 9457 extension member).
            body["current_available"] = json!(current);
        }
        if let Self::HoldBudgetExceeded { live, budget } = self {
            // What the buyer holds and may hold (RFC 9457 extension members).
            body["live_units"] = json!(live);
            body["budget"] = json!(budget);
        }
        if let Some(opens_at_ms) = self.opens_at_ms() {
            // When the sale opens (RFC 9457 extension member).
            body["opens_at"] = json!(crate::clock::rfc3339_ms(opens_at_ms as u64));
        }
        if let Self::OrderRefused { sku_id, refusal } = self {
            // The first line that failed and why (RFC 9457 extension member).
            body["line"] = json!({"sku_id": sku_id, "code": refusal.code()});
        }
        let mut response = HttpResponse::build(status);
        response.content_type("application/problem+json");
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS)));
        }
        if let Some(secs) = self.rate_limit_wait() {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from(secs)));
        }
        if status == StatusCode::UNAUTHORIZED {
            response.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if let Self::MethodNotAllowed(allow) = self {
            response.insert_header((header::ALLOW, HeaderValue::from_static(allow)));
        }
        response.body(body.to_string())
    }
}

impl ApiError {
    /// The wait a 429 or a `SALE_NOT_STARTED` tells in `Retry-After`: a
    /// rate limit's or the opening's, also when it refused an order's line.
    fn rate_limit_wait(&self) -> Option<u64> {
        match self {
            Self::RateLimited { retry_after_secs }
            | Self::SaleNotStarted {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            Self::OrderRefused { refusal, .. } => refusal.rate_limit_wait(),
            _ => None,
        }
    }

    /// The opening a `SALE_NOT_STARTED` tells, also of an order's line.
    fn opens_at_ms(&self) -> Option<i64> {
        match self {
            Self::SaleNotStarted { opens_at_ms, .. } => Some(*opens_at_ms),
            Self::OrderRefused { refusal, .. } => refusal.opens_at_ms(),
            _ => None,
        }
    }

    /// The answer to a refusal by a SKU's sale terms, `now_ms` by the
    /// node's sale clock (for the wait until the opening).
    pub fn gated(why: crate::domain::GateRefusal, now_ms: i64) -> Self {
        use crate::domain::GateRefusal;
        match why {
            GateRefusal::NotStarted { opens_at_ms } => Self::SaleNotStarted {
                opens_at_ms,
                retry_after_secs: crate::domain::sale::retry_after_secs(opens_at_ms, now_ms),
            },
            GateRefusal::Ended => Self::SaleEnded,
            GateRefusal::PassRequired => Self::PassRequired,
        }
    }

    /// A 429 whose `Retry-After` (whole seconds, at least 1) covers `wait_ms`.
    pub fn rate_limited(kind: &'static str, wait_ms: u64) -> Self {
        metrics::counter!("stockd_rate_limited_total", "kind" => kind).increment(1);
        Self::RateLimited {
            retry_after_secs: wait_ms.div_ceil(1000).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_statuses_follow_the_spec_table() {
        let cases: Vec<(ApiError, u16, &str)> = vec![
            (ApiError::SoldOut, 409, "SOLD_OUT"),
            (
                ApiError::InsufficientStock { available: 1 },
                409,
                "INSUFFICIENT_STOCK",
            ),
            (
                ApiError::LimitExceeded {
                    bought: 1,
                    limit: 1,
                },
                409,
                "LIMIT_EXCEEDED",
            ),
            (
                ApiError::LapseLimit { lapsed: 2, max: 2 },
                409,
                "LAPSE_LIMIT",
            ),
            (
                ApiError::HoldBudgetExceeded { live: 4, budget: 5 },
                409,
                "HOLD_BUDGET_EXCEEDED",
            ),
            (ApiError::IdempotencyMismatch, 422, "IDEMPOTENCY_MISMATCH"),
            (ApiError::IdTaken, 409, "ID_TAKEN"),
            (
                ApiError::SaleNotStarted {
                    opens_at_ms: 1,
                    retry_after_secs: 1,
                },
                409,
                "SALE_NOT_STARTED",
            ),
            (ApiError::SaleEnded, 409, "SALE_ENDED"),
            (ApiError::PassRequired, 403, "PASS_REQUIRED"),
            (ApiError::SaleOpen("x".into()), 409, "SALE_OPEN"),
            (ApiError::SkuNotFound(1), 404, "SKU_NOT_FOUND"),
            (ApiError::InvalidRequest("x".into()), 400, "INVALID_REQUEST"),
            (ApiError::Unavailable("x".into()), 503, "UNAVAILABLE"),
            (ApiError::ReservationNotFound, 404, "RESERVATION_NOT_FOUND"),
            (ApiError::ReservationReleased, 409, "RESERVATION_RELEASED"),
            (ApiError::ReservationConfirmed, 409, "RESERVATION_CONFIRMED"),
            (ApiError::ExtensionLimit(1), 409, "EXTENSION_LIMIT"),
            (ApiError::OrderLine, 409, "ORDER_LINE"),
            (ApiError::OrderNotFound, 404, "ORDER_NOT_FOUND"),
            (ApiError::Unauthorized, 401, "UNAUTHORIZED"),
            (ApiError::Unauthenticated, 401, "UNAUTHENTICATED"),
            (ApiError::Forbidden("read"), 403, "FORBIDDEN"),
            (ApiError::PassInvalid("x"), 403, "PASS_INVALID"),
            (ApiError::PassExpired("x"), 403, "PASS_EXPIRED"),
            (ApiError::PassUsed, 409, "PASS_USED"),
            (ApiError::PassesNotConfigured, 503, "PASSES_NOT_CONFIGURED"),
            (
                ApiError::Stale {
                    expected: 1,
                    current: 2,
                },
                409,
                "STALE",
            ),
            (
                ApiError::AdjustmentMismatch("x".into()),
                422,
                "IDEMPOTENCY_MISMATCH",
            ),
            (
                ApiError::RateLimited {
                    retry_after_secs: 1,
                },
                429,
                "RATE_LIMITED",
            ),
        ];
        for (err, status, code) in cases {
            assert_eq!(err.status_code().as_u16(), status, "{code}");
            assert_eq!(err.code(), code);
        }
    }

    #[tokio::test]
    async fn an_order_refusal_takes_its_lines_code_and_names_the_line() {
        let err = ApiError::OrderRefused {
            sku_id: 7,
            refusal: Box::new(ApiError::InsufficientStock { available: 1 }),
        };
        assert_eq!(err.status_code().as_u16(), 409);
        assert_eq!(err.code(), "INSUFFICIENT_STOCK");
        let body = actix_web::body::to_bytes(err.error_response().into_body())
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            body["line"],
            json!({"sku_id": 7, "code": "INSUFFICIENT_STOCK"})
        );
    }

    #[tokio::test]
    async fn a_rate_limited_order_line_says_when_to_retry_and_names_the_line() {
        let err = ApiError::OrderRefused {
            sku_id: 7,
            refusal: Box::new(ApiError::rate_limited("user", 2500)),
        };
        let response = err.error_response();
        assert_eq!(response.status().as_u16(), 429);
        assert_eq!(response.headers().get(header::RETRY_AFTER).unwrap(), "3");
        let body = actix_web::body::to_bytes(response.into_body())
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["line"], json!({"sku_id": 7, "code": "RATE_LIMITED"}));
    }

    #[test]
    fn a_503_carries_retry_after_and_problem_json() {
        let response = ApiError::Unavailable("x".into()).error_response();
        assert!(response.headers().contains_key(header::RETRY_AFTER));
        let ct = response.headers().get(header::CONTENT_TYPE).unwrap();
        assert_eq!(ct, "application/problem+json");
    }
}
