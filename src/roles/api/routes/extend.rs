//! `POST .../reservations/{request_id}/extend` (contract §5, "Extending the
//! time to pay"): the hold while the buyer pays.
//!
//! What the order service does with each answer:
//! - 200 `RESERVED` with the new `expires_at`: the payment has until then.
//! - 409 `EXTENSION_LIMIT`: `reservation.max_extensions` used up; the body of
//!   a `GET` still tells the time left.
//! - 409 `RESERVATION_RELEASED` / `RESERVATION_CONFIRMED` /
//!   `RESERVATION_REJECTED`: final, as for a confirm or a cancel.

use actix_web::{web, HttpRequest, HttpResponse};

use super::contract::{
    ExtendConflict, Forbidden, InvalidRequest, RateLimited, ReservationNotFound, ReservationPath,
    Unauthenticated, Unavailable,
};
use super::{request_from, sku_from};
use crate::domain::ReservationStatus;
use crate::ops::lifecycle::{self, Asked, ExtendOutcome, Extension, LifecycleError};
use crate::roles::api::auth::{Granted, Lifecycle};
use crate::roles::api::problem::ApiError;
use crate::roles::api::views::ReservationView;
use crate::roles::api::ApiState;

/// Extend a reservation's time to pay by `reservation.extend_secs`.
///
/// At most `reservation.max_extensions` times; MySQL decides, so an
/// extension racing the expiry has one winner. Needs a client token with
/// scope `lifecycle` when `auth.required` is true (contract §6, "Who may call").
#[utoipa::path(
    post,
    path = "/v1/skus/{sku_id}/reservations/{request_id}/extend",
    tag = "reservations",
    operation_id = "extend_reservation",
    params(ReservationPath),
    security(("client_token" = ["lifecycle"])),
    responses(
        (status = 200, description = "Extended: still `RESERVED`, with the new `expires_at`", body = ReservationView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = ReservationNotFound),
        (status = 409, response = ExtendConflict),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn extend(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let sku_id = sku_from(&req)?;
    let request_id = request_from(&req)?;
    let extension = Extension::from_settings(&state.res.settings.reservation);
    let asked = Asked {
        sku_id,
        request_id: &request_id,
        requester: scope.requester(),
    };
    let outcome = lifecycle::extend(
        &state.res.db,
        &state.res.redis,
        extension,
        &asked,
        crate::clock::unix_ms(),
    )
    .await
    .map_err(|err| match err {
        LifecycleError::Db(e) => ApiError::unavailable("mysql", e),
        LifecycleError::Redis(e) => ApiError::unavailable("redis", e),
    })?;
    match outcome {
        ExtendOutcome::Extended { row, .. } => {
            Ok(HttpResponse::Ok().json(ReservationView::new(&row.to_reservation(), Some(true))))
        }
        ExtendOutcome::LimitReached { .. } => Err(ApiError::ExtensionLimit(extension.max)),
        ExtendOutcome::Final { row } => Err(match row.status {
            ReservationStatus::Confirmed => ApiError::ReservationConfirmed,
            ReservationStatus::Released => ApiError::ReservationReleased,
            _ => ApiError::ReservationRejected,
        }),
        ExtendOutcome::NotFound => Err(ApiError::ReservationNotFound),
        ExtendOutcome::OrderLine => Err(ApiError::OrderLine),
    }
}
