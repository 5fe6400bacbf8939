//! Confirm, cancel and extend of a hold, both URL families through one core
//! (contract §5, §6): `POST /v1/skus/{sku_id}/reservations/{request_id}/…`
//! moves a single reservation (a hold of one line), `POST
//! /v1/orders/{order_id}/…` a whole order (a hold of N lines). MySQL decides
//! in one transaction (`ops::lifecycle`), so pay, expiry and extension racing
//! have one winner and no order is ever half confirmed, half released or half
//! extended. The two families differ only in how the hold is named, found
//! missing and shown ([`Target`]); what a move came to is one type for both
//! and its answer one mapping (`moved`). A confirm or cancel runs in its
//! `lifecycle` span (`roles/traces.rs`), an order's as a reservation's.
//!
//! What the order service does with each answer (a reservation or an order):
//! - confirm 200 `CONFIRMED`: the units are sold; repeats are 200 with the same body.
//! - confirm 409 `RESERVATION_RELEASED`: the hold expired or was cancelled
//!   before payment; refund the buyer.
//! - cancel 200 `RELEASED`: the units are back on sale; repeats are 200.
//! - cancel 409 `RESERVATION_CONFIRMED`: it was paid; run the refund flow instead.
//! - 409 `RESERVATION_REJECTED`: stockd could not honour the hold; refund.
//! - extend 200 `RESERVED` with the new `expires_at`: the payment has until then.
//! - extend 409 `EXTENSION_LIMIT`: `reservation.max_extensions` used up; the
//!   body of a `GET` still tells the time left.
//! - a single route on an order's line: 409 `ORDER_LINE` (move the order).

mod moved;

use actix_web::{web, HttpRequest, HttpResponse};
use opentelemetry::Context;

use self::moved::{answer, Moved, Shown};
use super::contract::{
    CancelConflict, ConfirmConflict, ExtendConflict, Forbidden, InvalidRequest,
    OrderCancelConflict, OrderConfirmConflict, OrderExtendConflict, OrderNotFound, OrderPath,
    RateLimited, ReservationNotFound, ReservationPath, Unauthenticated, Unavailable,
};
use super::{order_from, request_from, sku_from};
use crate::domain::{RequestId, Requester, SkuId};
use crate::ops::lifecycle::{self, Extension, LifecycleError, OrderHold, SingleHold, Transition};
use crate::otel::{self, Tracing};
use crate::roles::api::auth::{Granted, Lifecycle};
use crate::roles::api::hold_views::{OrderView, ReservationView};
use crate::roles::api::problem::ApiError;
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
pub async fn confirm_reservation(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let target = Target::reservation(&req)?;
    transition_hold(&state, &target, Transition::Confirm, scope.requester()).await
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
pub async fn cancel_reservation(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let target = Target::reservation(&req)?;
    transition_hold(&state, &target, Transition::Cancel, scope.requester()).await
}

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
pub async fn extend_reservation(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let target = Target::reservation(&req)?;
    extend_hold(&state, &target, scope.requester()).await
}

/// Confirm a whole order (it was paid). Repeats answer 200 again.
///
/// Needs a client token with scope `lifecycle` when `auth.required` is true.
#[utoipa::path(
    post,
    path = "/v1/orders/{order_id}/confirm",
    tag = "orders",
    operation_id = "confirm_order",
    params(OrderPath),
    security(("client_token" = ["lifecycle"])),
    responses(
        (status = 200, description = "Confirmed (status `CONFIRMED`): every line is sold", body = OrderView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = OrderNotFound),
        (status = 409, response = OrderConfirmConflict),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn confirm_order(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let target = Target::order(&req)?;
    transition_hold(&state, &target, Transition::Confirm, scope.requester()).await
}

/// Cancel a whole order: every line's units go back on sale. Repeats
/// answer 200 again.
///
/// Needs a client token with scope `lifecycle` when `auth.required` is true.
#[utoipa::path(
    post,
    path = "/v1/orders/{order_id}/cancel",
    tag = "orders",
    operation_id = "cancel_order",
    params(OrderPath),
    security(("client_token" = ["lifecycle"])),
    responses(
        (status = 200, description = "Released (status `RELEASED`): every line's units are back on sale", body = OrderView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = OrderNotFound),
        (status = 409, response = OrderCancelConflict),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn cancel_order(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let target = Target::order(&req)?;
    transition_hold(&state, &target, Transition::Cancel, scope.requester()).await
}

/// Extend a whole order's time to pay by `reservation.extend_secs`.
///
/// At most `reservation.max_extensions` times; MySQL decides, so an
/// extension racing the expiry has one winner. Needs a client token with
/// scope `lifecycle` when `auth.required` is true.
#[utoipa::path(
    post,
    path = "/v1/orders/{order_id}/extend",
    tag = "orders",
    operation_id = "extend_order",
    params(OrderPath),
    security(("client_token" = ["lifecycle"])),
    responses(
        (status = 200, description = "Extended: still `RESERVED`, with the new `expires_at` on the order and every line", body = OrderView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = OrderNotFound),
        (status = 409, response = OrderExtendConflict),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn extend_order(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let target = Target::order(&req)?;
    extend_hold(&state, &target, scope.requester()).await
}

/// The hold a lifecycle route names: a reservation by its SKU and request
/// id, or an order by its id.
enum Target {
    Reservation {
        sku_id: SkuId,
        request_id: RequestId,
    },
    Order {
        order_id: RequestId,
    },
}

impl Target {
    fn reservation(req: &HttpRequest) -> Result<Self, ApiError> {
        Ok(Self::Reservation {
            sku_id: sku_from(req)?,
            request_id: request_from(req)?,
        })
    }

    fn order(req: &HttpRequest) -> Result<Self, ApiError> {
        Ok(Self::Order {
            order_id: order_from(req)?,
        })
    }

    /// The family's 404 (`RESERVATION_NOT_FOUND` or `ORDER_NOT_FOUND`).
    fn not_found(&self) -> ApiError {
        match self {
            Self::Reservation { .. } => ApiError::ReservationNotFound,
            Self::Order { .. } => ApiError::OrderNotFound,
        }
    }

    /// The transition's span, under the request's (none with tracing off).
    fn span(&self, tracing: &Tracing, transition: Transition) -> Option<Context> {
        if !tracing.is_on() {
            return None;
        }
        let parent = Context::current();
        match self {
            Self::Reservation { sku_id, request_id } => {
                traces::transition_span(tracing, &parent, transition, *sku_id, request_id)
            }
            Self::Order { order_id } => {
                traces::order_transition_span(tracing, &parent, transition, order_id)
            }
        }
    }
}

/// Confirm or cancel the hold, in its span.
async fn transition_hold(
    state: &ApiState,
    target: &Target,
    transition: Transition,
    requester: &Requester,
) -> Result<HttpResponse, ApiError> {
    let (db, redis) = (&state.res.db, &state.res.redis);
    let now_ms = crate::clock::unix_ms();
    let span = target.span(&state.res.tracing, transition);
    let moved = match target {
        Target::Reservation { sku_id, request_id } => {
            let hold = SingleHold {
                sku_id: *sku_id,
                request_id,
            };
            lifecycle::transition(db, redis, &hold, transition, now_ms, requester)
                .await
                .map(Moved::of)
        }
        Target::Order { order_id } => {
            let hold = OrderHold { order_id };
            lifecycle::transition(db, redis, &hold, transition, now_ms, requester)
                .await
                .map(Moved::of)
        }
    };
    otel::end(
        span,
        moved.as_ref().map_or("error", Moved::label),
        moved.is_err(),
    );
    let moved = moved.map_err(unavailable)?;
    if let Moved::Done {
        hold,
        changed: true,
    } = &moved
    {
        count_and_free(state, target, transition, hold);
    }
    answer(target, moved)
}

/// A change that went through: a cancel puts the units back on sale (the
/// local sold-out flags of the hold's SKUs clear); both count.
fn count_and_free(state: &ApiState, target: &Target, transition: Transition, hold: &Shown) {
    if transition == Transition::Cancel {
        if let Some(board) = &state.soldout {
            let buckets = state.res.redis.buckets();
            for &sku_id in &hold.skus {
                if let Some(bucket) = buckets.cached_bucket_of(sku_id, hold.user_id) {
                    board.clear(sku_id, bucket);
                }
            }
        }
        metrics::counter!("stockd_closer_releases_total", "reason" => "CANCELLED", "path" => "api")
            .increment(hold.skus.len() as u64);
    }
    if let Target::Order { .. } = target {
        let label = match transition {
            Transition::Confirm => "confirmed",
            _ => "cancelled",
        };
        metrics::counter!("stockd_orders_total", "result" => label).increment(1);
    }
}

/// Extend the hold's time to pay.
async fn extend_hold(
    state: &ApiState,
    target: &Target,
    requester: &Requester,
) -> Result<HttpResponse, ApiError> {
    let (db, redis) = (&state.res.db, &state.res.redis);
    let extension = Extension::from_settings(&state.res.settings.reservation);
    let now_ms = crate::clock::unix_ms();
    let moved = match target {
        Target::Reservation { sku_id, request_id } => {
            let hold = SingleHold {
                sku_id: *sku_id,
                request_id,
            };
            lifecycle::extend(db, redis, &hold, extension, now_ms, requester)
                .await
                .map(|outcome| Moved::of_extension(outcome, extension.max))
        }
        Target::Order { order_id } => {
            let hold = OrderHold { order_id };
            lifecycle::extend(db, redis, &hold, extension, now_ms, requester)
                .await
                .map(|outcome| Moved::of_extension(outcome, extension.max))
        }
    };
    answer(target, moved.map_err(unavailable)?)
}

fn unavailable(err: LifecycleError) -> ApiError {
    match err {
        LifecycleError::Db(e) => ApiError::unavailable("mysql", e),
        LifecycleError::Redis(e) => ApiError::unavailable("redis", e),
    }
}
