//! `POST /v1/orders/{order_id}/confirm`, `/cancel` and `/extend`: the whole
//! order moves, with the rules of a single reservation (contract §5). MySQL
//! decides in one transaction over the order row and every line
//! (`ops::lifecycle::order`), so pay and expiry racing have one winner and
//! no order is ever half confirmed, half released or half extended.
//!
//! What the order service does with each answer is what it does for a
//! reservation (`routes::lifecycle`, `routes::extend`).

use actix_web::{web, HttpRequest, HttpResponse};

use super::contract::{
    Forbidden, InvalidRequest, OrderCancelConflict, OrderConfirmConflict, OrderExtendConflict,
    OrderNotFound, OrderPath, RateLimited, Unauthenticated, Unavailable,
};
use super::order_from;
use crate::db::orders::OrderRow;
use crate::domain::ReservationStatus;
use crate::ops::lifecycle::{
    self, Extension, LifecycleError, OrderExtendOutcome, OrderTransitionOutcome, Transition,
};
use crate::roles::api::auth::{Granted, Lifecycle};
use crate::roles::api::order_views::OrderView;
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

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
pub async fn confirm(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    apply(req, state, Transition::Confirm, scope.requester()).await
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
pub async fn cancel(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    apply(req, state, Transition::Cancel, scope.requester()).await
}

fn unavailable(err: LifecycleError) -> ApiError {
    match err {
        LifecycleError::Db(e) => ApiError::unavailable("mysql", e),
        LifecycleError::Redis(e) => ApiError::unavailable("redis", e),
    }
}

/// The conflict a final order answers.
fn final_state(order: &OrderRow) -> ApiError {
    match order.status {
        ReservationStatus::Confirmed => ApiError::ReservationConfirmed,
        ReservationStatus::Released => ApiError::ReservationReleased,
        _ => ApiError::ReservationRejected,
    }
}

async fn apply(
    req: HttpRequest,
    state: web::Data<ApiState>,
    transition: Transition,
    requester: &crate::domain::Requester,
) -> Result<HttpResponse, ApiError> {
    let order_id = order_from(&req)?;
    let outcome = lifecycle::transition_order(
        &state.res.db,
        &state.res.redis,
        &order_id,
        transition,
        crate::clock::unix_ms(),
        requester,
    )
    .await
    .map_err(unavailable)?;
    match outcome {
        OrderTransitionOutcome::Done { order, changed } => {
            if changed && transition == Transition::Cancel {
                clear_sold_out_flags(&state, &order);
                metrics::counter!("stockd_closer_releases_total", "reason" => "CANCELLED", "path" => "api")
                    .increment(order.lines.len() as u64);
            }
            let label = match transition {
                Transition::Confirm => "confirmed",
                _ => "cancelled",
            };
            if changed {
                metrics::counter!("stockd_orders_total", "result" => label).increment(1);
            }
            Ok(HttpResponse::Ok().json(persisted(&order)))
        }
        OrderTransitionOutcome::Conflict { order } => Err(final_state(&order)),
        OrderTransitionOutcome::NotFound => Err(ApiError::OrderNotFound),
        OrderTransitionOutcome::NotYetExpired => unreachable!("only the closer expires"),
    }
}

fn persisted(order: &OrderRow) -> OrderView {
    OrderView {
        persisted: Some(true),
        ..OrderView::of_row(order)
    }
}

/// A cancelled order put units back on each line's SKU.
fn clear_sold_out_flags(state: &ApiState, order: &OrderRow) {
    let Some(board) = &state.soldout else {
        return;
    };
    for line in order.lines.lines() {
        let buckets = state.res.redis.buckets();
        if let Some(bucket) = buckets.cached_bucket_of(line.sku_id, order.user_id) {
            board.clear(line.sku_id, bucket);
        }
    }
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
pub async fn extend(
    scope: Granted<Lifecycle>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let order_id = order_from(&req)?;
    let extension = Extension::from_settings(&state.res.settings.reservation);
    let outcome = lifecycle::extend_order(
        &state.res.db,
        &state.res.redis,
        extension,
        &order_id,
        crate::clock::unix_ms(),
        scope.requester(),
    )
    .await
    .map_err(unavailable)?;
    match outcome {
        OrderExtendOutcome::Extended { order } => Ok(HttpResponse::Ok().json(persisted(&order))),
        OrderExtendOutcome::LimitReached { .. } => Err(ApiError::ExtensionLimit(extension.max)),
        OrderExtendOutcome::Final { order } => Err(final_state(&order)),
        OrderExtendOutcome::NotFound => Err(ApiError::OrderNotFound),
    }
}
