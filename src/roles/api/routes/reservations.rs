//! `POST /v1/skus/{sku_id}/reservations` and `GET .../reservations/{request_id}`.
//!
//! The hot path is one EVALSHA. With `durability: queue` the handler then awaits
//! its own publisher confirm (others' publishes pipeline beside it); with
//! `durability: redis` the publish is spawned and the answer goes out at once.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};

use super::contract::{
    Forbidden, IdempotencyMismatch, InvalidRequest, RateLimited, ReservationNotFound,
    ReservationPath, ReserveConflict, SkuNotFound, SkuPath, Unauthenticated, Unavailable,
    UnsupportedMediaType,
};
use super::sku_from;
use crate::config::Durability;
use crate::db::{ledger, sku};
use crate::domain::Deduction;
use crate::domain::{ReserveOutcome, SkuId};
use crate::otel;
use crate::redis::OutboxStream;
use crate::roles::api::auth::{Granted, Read, Reserve};
use crate::roles::api::problem::ApiError;
use crate::roles::api::trace_context;
use crate::roles::api::views::{ReservationView, ReserveBody};
use crate::roles::api::ApiState;

/// Reserve units of a SKU.
///
/// Idempotent on `request_id`: an identical retry replays the first answer
/// (200 with `Idempotent-Replayed: true`); the same id with another user or
/// count is 422; the id of another client's reservation is 409 `ID_TAKEN`
/// (with `auth.required`). A buyer whose holds on the SKU lapsed unpaid
/// `limits.max_lapsed_holds` times is refused (409 `LAPSE_LIMIT`).
///
/// Needs a client token with scope `reserve` when `auth.required` is true
/// (contract §6, "Who may call").
#[utoipa::path(
    post,
    path = "/v1/skus/{sku_id}/reservations",
    tag = "reservations",
    operation_id = "reserve",
    params(SkuPath),
    security(("client_token" = ["reserve"])),
    request_body(content = ReserveBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Reserved, and the hand-off to the ledger is confirmed by the broker",
         body = ReservationView,
         headers(("Location" = String, description = "URL of the reservation"))),
        (status = 202, description = "Reserved; the broker has not confirmed the hand-off yet, the outbox relay will (contract §3)",
         body = ReservationView,
         headers(("Location" = String, description = "URL of the reservation"))),
        (status = 200, description = "An identical replay: the reservation made by the first request",
         body = ReservationView,
         headers(("Idempotent-Replayed" = String, description = "Always `true`"))),
        (status = 400, response = InvalidRequest),
        (status = 415, response = UnsupportedMediaType),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = SkuNotFound),
        (status = 409, response = ReserveConflict),
        (status = 422, response = IdempotencyMismatch),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn reserve(
    scope: Granted<Reserve>,
    req: HttpRequest,
    state: web::Data<ApiState>,
    body: web::Json<ReserveBody>,
) -> Result<HttpResponse, ApiError> {
    let started = std::time::Instant::now();
    let sku_id = sku_from(&req)?;
    let (user_id, count) = body.validate(state.res.settings.reservation.max_count)?;
    let layout = state.res.redis.buckets().cached_layout(sku_id);
    if let (Some(board), Some(layout)) = (&state.soldout, layout) {
        if board.short_circuits(&layout, user_id, &body.request_id) {
            metrics::counter!("stockd_reservations_total", "result" => "sold_out").increment(1);
            return Err(ApiError::SoldOut);
        }
    }
    let tracing = &state.res.tracing;
    let redis_span = trace_context::redis_span(tracing, sku_id, &body.request_id);
    let outcome = state
        .res
        .redis
        .reservations()
        .reserve(sku_id, &body.request_id, user_id, count, scope.requester())
        .await;
    otel::end(
        redis_span,
        outcome.as_ref().map_or("error", |o| o.label()),
        outcome.is_err(),
    );
    let outcome = outcome.map_err(|e| {
        metrics::counter!("stockd_reservations_total", "result" => "error").increment(1);
        trace_context::reservation(tracing, sku_id, &body.request_id, "error");
        ApiError::unavailable("redis", e)
    })?;
    let bucket = state.res.redis.buckets().cached_bucket_of(sku_id, user_id);
    flag_if_sold_out(&state, sku_id, bucket, &outcome);
    refill_ahead(&state, sku_id, &outcome);
    let label = outcome.label();
    let response = answer(&state, sku_id, outcome).await;
    // A SKU missing from Redis is counted by what it turned out to be.
    let label = match (&response, label) {
        (Err(ApiError::SkuNotFound(_)), _) => "not_found",
        (Err(ApiError::Unavailable(_)), "not_loaded") => "not_loaded",
        (_, label) => label,
    };
    metrics::counter!("stockd_reservations_total", "result" => label).increment(1);
    trace_context::reservation(tracing, sku_id, &body.request_id, label);
    metrics::histogram!("stockd_reserve_duration_seconds").record(started.elapsed().as_secs_f64());
    response
}

/// The SKU just sold out (or was found sold out): flag it locally without
/// waiting for our own Pub/Sub event. Off the response path.
fn flag_if_sold_out(
    state: &ApiState,
    sku_id: SkuId,
    bucket: Option<u16>,
    outcome: &ReserveOutcome,
) {
    let sold_out = match outcome {
        ReserveOutcome::SoldOut => true,
        ReserveOutcome::Reserved {
            available_after, ..
        } => *available_after == 0,
        _ => false,
    };
    if let (true, Some(board), Some(bucket)) = (sold_out, &state.soldout, bucket) {
        if !board.is_bucket_flagged(sku_id, bucket) {
            let board = board.clone();
            tokio::spawn(async move { board.refresh(sku_id, bucket).await });
        }
    }
}

/// A split SKU's bucket running low: lease more before buyers find it dry.
/// Off the response path.
fn refill_ahead(state: &ApiState, sku_id: SkuId, outcome: &ReserveOutcome) {
    let ReserveOutcome::Reserved {
        available_after,
        bucket,
        ..
    } = *outcome
    else {
        return;
    };
    let redis = &state.res.redis;
    let Some(layout) = redis.buckets().cached_layout(sku_id) else {
        return;
    };
    if layout.is_split() && redis.buckets().runs_low(available_after) {
        let redis = redis.clone();
        tokio::spawn(async move { redis.buckets().refill_ahead(&layout, bucket).await });
    }
}

async fn answer(
    state: &ApiState,
    sku_id: SkuId,
    outcome: ReserveOutcome,
) -> Result<HttpResponse, ApiError> {
    match outcome {
        ReserveOutcome::Reserved {
            reservation,
            outbox_id,
            bucket,
            available_after,
        } => {
            let msg = Deduction::from(&reservation);
            let stream = OutboxStream::of_bucket(sku_id, bucket);
            let exchange = &state.res.publisher.topology().reservations_exchange;
            let (span, trace) = trace_context::publish_span(&state.res.tracing, exchange, &msg);
            let group_commit = state.group_commit.clone();
            let publish = async move {
                let published = group_commit
                    .publish_traced(stream, outbox_id, msg, trace, Some(available_after as i64))
                    .await;
                let outcome = published
                    .as_ref()
                    .map_or_else(|e| e.label(), |()| "confirmed");
                otel::end(span, outcome, published.is_err());
                published.is_ok()
            };
            let confirmed = match state.res.settings.reservation.durability {
                Durability::Redis => {
                    tokio::spawn(publish);
                    true
                }
                Durability::Queue => publish.await,
            };
            // Never undo on a late confirm: the reservation stands in the outbox
            // and the relay will publish it; 202 tells the client exactly that.
            let mut response = if confirmed {
                HttpResponse::Created()
            } else {
                HttpResponse::Accepted()
            };
            let location = format!("/v1/skus/{sku_id}/reservations/{}", reservation.request_id);
            Ok(response
                .insert_header((header::LOCATION, location))
                .json(ReservationView::new(&reservation, None)))
        }
        ReserveOutcome::Replayed { reservation } => Ok(HttpResponse::Ok()
            .insert_header(("Idempotent-Replayed", "true"))
            .json(ReservationView::new(&reservation, None))),
        ReserveOutcome::Mismatch => Err(ApiError::IdempotencyMismatch),
        ReserveOutcome::Taken => Err(ApiError::IdTaken),
        ReserveOutcome::LimitExceeded { bought, limit } => {
            Err(ApiError::LimitExceeded { bought, limit })
        }
        ReserveOutcome::LapseLimit { lapsed, max } => Err(ApiError::LapseLimit { lapsed, max }),
        ReserveOutcome::SoldOut => Err(ApiError::SoldOut),
        ReserveOutcome::Insufficient { available } => {
            Err(ApiError::InsufficientStock { available })
        }
        ReserveOutcome::Backpressure => Err(ApiError::Unavailable(
            "the outbox is full: the broker is not confirming; retry shortly".into(),
        )),
        ReserveOutcome::NotLoaded => Err(not_loaded(state, sku_id).await),
        ReserveOutcome::RateLimited { retry_after_ms } => {
            Err(ApiError::rate_limited("user", retry_after_ms))
        }
        ReserveOutcome::Rebalancing => Err(ApiError::Unavailable(
            "the SKU's stock is moving between its buckets; retry shortly".into(),
        )),
    }
}

/// A SKU missing from Redis is either unknown (404) or not warmed up (503);
/// never "0" and never "unlimited".
pub async fn not_loaded(state: &ApiState, sku_id: SkuId) -> ApiError {
    let known = state.res.db.bounded(async {
        let mut conn = state.res.db.conn().await?;
        sku::get(&mut conn, sku_id).await
    });
    match known.await {
        Ok(Some(_)) => {
            ApiError::Unavailable(format!("SKU {sku_id} is not loaded into Redis; warm it up"))
        }
        Ok(None) => ApiError::SkuNotFound(sku_id.get()),
        Err(err) => ApiError::unavailable("mysql", err),
    }
}

/// Look up a reservation.
///
/// Needs a client token with scope `read` when `auth.required` is true
/// (contract §6, "Who may call").
#[utoipa::path(
    get,
    path = "/v1/skus/{sku_id}/reservations/{request_id}",
    tag = "reservations",
    operation_id = "get_reservation",
    params(ReservationPath),
    security(("client_token" = ["read"])),
    responses(
        (status = 200, description = "The reservation; `persisted` tells whether it is in MySQL yet",
         body = ReservationView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = ReservationNotFound),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn get(
    scope: Granted<Read>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let sku_id = sku_from(&req)?;
    let request_id = super::request_from(&req)?;
    let in_redis = state
        .res
        .redis
        .reservations()
        .reservation(sku_id, &request_id)
        .await
        .map_err(|e| ApiError::unavailable("redis", e))?;
    let db = &state.res.db;
    let in_mysql = db
        .bounded(async {
            let mut conn = db.conn().await?;
            ledger::find(&mut conn, sku_id, &request_id).await
        })
        .await
        .map_err(|e| ApiError::unavailable("mysql", e))?;
    // Another client's reservation is not there for this one (contract §6.2).
    let owners = [
        in_redis.as_ref().and_then(|r| r.client.as_deref()),
        in_mysql.as_ref().and_then(|row| row.client.as_deref()),
    ];
    if !owners
        .iter()
        .all(|owner| scope.requester().may_act_on(*owner))
    {
        return Err(ApiError::ReservationNotFound);
    }
    let view = match (in_redis, &in_mysql) {
        // MySQL decides final states; Redis may lag behind a transition.
        (Some(mut r), Some(row)) => {
            r.status = row.status;
            ReservationView::new(&r, Some(true))
        }
        (Some(r), None) => ReservationView::new(&r, Some(false)),
        (None, Some(row)) => ReservationView::new(&row.to_reservation(), Some(true)),
        (None, None) => return Err(ApiError::ReservationNotFound),
    };
    Ok(HttpResponse::Ok().json(view))
}
