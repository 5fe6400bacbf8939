//! `POST .../reservations/{request_id}/confirm` and `/cancel` (contract §5, §6).
//!
//! What the order service does with each answer:
//! - confirm 200 `CONFIRMED`: the unit is sold; repeats are 200 with the same body.
//! - confirm 409 `RESERVATION_RELEASED`: the reservation expired or was cancelled
//!   before payment; refund the buyer.
//! - cancel 200 `RELEASED`: the unit is back on sale; repeats are 200.
//! - cancel 409 `RESERVATION_CONFIRMED`: it was paid; run the refund flow instead.
//! - 409 `RESERVATION_REJECTED`: stockd could not honour the reservation; refund.

use actix_web::{web, HttpRequest, HttpResponse};

use super::contract::{
    CancelConflict, ConfirmConflict, Forbidden, InvalidRequest, RateLimited, ReservationNotFound,
    ReservationPath, Unauthenticated, Unavailable,
};
use super::{request_from, sku_from};
use crate::domain::{Requester, ReservationStatus};
use crate::ops::lifecycle::{self, LifecycleError, Transition, TransitionOutcome};
use crate::otel;
use crate::roles::api::auth::{Granted, Lifecycle};
use crate::roles::api::problem::ApiError;
use crate::roles::api::views::ReservationView;
use crate::roles::api::ApiState;
use crate::roles::traces;

/// Confirm a reservation (the order was paid). Repeats answer 200 again.
///
/// Needs a client token with scope `lifecycle` when `auth.required` is true
/// (contract §6, "Who may call").
#[utoipa::path(
    post,
    path = "/v1/skus/{sku_id}/reservations/{request_id}/confirm",
    tag = "reservations",
    operation_id = "confirm_reservation",
    params(ReservationPath),
    security(("client_token" = ["lifecycle"])),
    responses(
        (status = 200, description = "Confirmed (status `CONFIRMED`); the unit is sold", body = ReservationView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = ReservationNotFound),
        (status = 409, response = ConfirmConflict),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn confirm(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    apply(req, state, Transition::Confirm, scope.requester()).await
}

/// Cancel a reservation: its units go back on sale. Repeats answer 200 again.
///
/// Needs a client token with scope `lifecycle` when `auth.required` is true
/// (contract §6, "Who may call").
#[utoipa::path(
    post,
    path = "/v1/skus/{sku_id}/reservations/{request_id}/cancel",
    tag = "reservations",
    operation_id = "cancel_reservation",
    params(ReservationPath),
    security(("client_token" = ["lifecycle"])),
    responses(
        (status = 200, description = "Released (status `RELEASED`); the units are back on sale", body = ReservationView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = ReservationNotFound),
        (status = 409, response = CancelConflict),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn cancel(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    apply(req, state, Transition::Cancel, scope.requester()).await
}

async fn apply(
    req: HttpRequest,
    state: web::Data<ApiState>,
    transition: Transition,
    requester: &Requester,
) -> Result<HttpResponse, ApiError> {
    let sku_id = sku_from(&req)?;
    let request_id = request_from(&req)?;
    let now_ms = crate::clock::unix_ms();
    let tracing = &state.res.tracing;
    let span = tracing.is_on().then(|| {
        let parent = opentelemetry::Context::current();
        traces::transition_span(tracing, &parent, transition, sku_id, &request_id)
    });
    let outcome = lifecycle::transition(
        &state.res.db,
        &state.res.redis,
        sku_id,
        &request_id,
        transition,
        now_ms,
        requester,
    )
    .await;
    let label = outcome.as_ref().map_or("error", traces::transition_outcome);
    otel::end(span.flatten(), label, outcome.is_err());
    let outcome = outcome.map_err(|err| match err {
        LifecycleError::Db(e) => ApiError::unavailable("mysql", e),
        LifecycleError::Redis(e) => ApiError::unavailable("redis", e),
    })?;
    match outcome {
        TransitionOutcome::Done { row, changed } => {
            if changed && transition == Transition::Cancel {
                let bucket = state
                    .res
                    .redis
                    .buckets()
                    .cached_bucket_of(sku_id, row.user_id);
                if let (Some(board), Some(bucket)) = (&state.soldout, bucket) {
                    board.clear(sku_id, bucket);
                }
                metrics::counter!("stockd_closer_releases_total", "reason" => "CANCELLED", "path" => "api")
                    .increment(1);
            }
            Ok(HttpResponse::Ok().json(ReservationView::new(&row.to_reservation(), Some(true))))
        }
        TransitionOutcome::Conflict { row } => Err(match row.status {
            ReservationStatus::Confirmed => ApiError::ReservationConfirmed,
            ReservationStatus::Released => ApiError::ReservationReleased,
            _ => ApiError::ReservationRejected,
        }),
        TransitionOutcome::NotFound => Err(ApiError::ReservationNotFound),
        TransitionOutcome::OrderLine => Err(ApiError::OrderLine),
        TransitionOutcome::NotYetExpired => unreachable!("only the closer expires"),
    }
}
