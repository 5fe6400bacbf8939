//! `POST /v1/skus/{sku_id}/reservations` and `GET .../reservations/{request_id}`:
//! a hold of one line, named by its `request_id`.
//!
//! The hot path is one EVALSHA of `reserve.lua`, traced (the script's span,
//! the publish's span, the outcome on the request's span), then the hand-off
//! of [`super`].

use actix_web::{web, HttpRequest, HttpResponse};

use super::super::contract::{
    Forbidden, HoldForbidden, IdempotencyMismatch, InvalidRequest, RateLimited,
    ReservationNotFound, ReservationPath, ReserveConflict, SkuNotFound, SkuPath, Unauthenticated,
    Unavailable, UnsupportedMediaType,
};
use super::super::{request_from, sku_from};
use super::pass_gate;
use super::{
    budget, copies, flag_sold_out, hand_off, held, refusal, replayed, sale_gate, short_circuited,
    HoldRef, BACKPRESSURE,
};
use crate::db::ledger;
use crate::domain::{Deduction, RequestId, ReservationStatus, ReserveOutcome, SkuId, UserId};
use crate::otel;
use crate::redis::{BudgetLine, LineRefusal, OutboxStream, RedisError};
use crate::roles::api::auth::{Granted, Read, Reserve};
use crate::roles::api::hold_views::{ReservationView, ReserveBody};
use crate::roles::api::problem::ApiError;
use crate::roles::api::trace_context;
use crate::roles::api::ApiState;

/// Reserve units of a SKU.
///
/// Idempotent on `request_id`: an identical retry replays the first answer
/// (200 with `Idempotent-Replayed: true`); the same id with another user or
/// count is 422; the id of another client's reservation is 409 `ID_TAKEN`
/// (with `auth.required`). A buyer whose holds on the SKU lapsed unpaid
/// `limits.max_lapsed_holds` times is refused (409 `LAPSE_LIMIT`), and one
/// whose live units across every SKU would exceed
/// `limits.buyer_max_live_units` (409 `HOLD_BUDGET_EXCEEDED`).
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
        (status = 403, response = HoldForbidden),
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
    let hold = HoldRef::Reservation {
        sku_id,
        request_id: &body.request_id,
    };
    let has_pass = body.pass.is_some();
    if let Some((_, why)) = sale_gate::early_refusal(&state, &[sku_id], has_pass, &hold).await? {
        metrics::counter!("stockd_reservations_total", "result" => why.label()).increment(1);
        return Err(sale_gate::answer(&state, why));
    }
    let pass = body.pass.as_deref();
    let admitted = pass_gate::admit(&state, pass, user_id, &[sku_id], &hold).await?;
    if short_circuited(&state, user_id, &body.request_id, [sku_id]).is_some() {
        metrics::counter!("stockd_reservations_total", "result" => "sold_out").increment(1);
        return Err(ApiError::SoldOut);
    }
    let claimed = pass_gate::claim_for_reservation(&state, user_id, &admitted, &hold).await;
    let (claimed, pass_arg) = claimed.inspect_err(|err| {
        if matches!(err, ApiError::PassUsed) {
            metrics::counter!("stockd_reservations_total", "result" => "pass_used").increment(1);
        }
    })?;
    let claim = match claim_budget(&state, sku_id, &body.request_id, user_id, count).await {
        Ok(claim) => claim,
        Err(err) => {
            pass_gate::give_back(&state, claimed).await;
            return Err(err);
        }
    };
    let tracing = &state.res.tracing;
    let redis_span = trace_context::redis_span(tracing, sku_id, &body.request_id);
    let outcome = state
        .res
        .redis
        .reservations()
        .reserve_carrying(
            sku_id,
            &body.request_id,
            user_id,
            count,
            scope.requester(),
            pass_arg,
        )
        .await;
    otel::end(
        redis_span,
        outcome.as_ref().map_or("error", |o| o.label()),
        outcome.is_err(),
    );
    claim.settle(&state, leaves_it_live(&outcome)).await;
    let outcome = outcome.map_err(|e| {
        metrics::counter!("stockd_reservations_total", "result" => "error").increment(1);
        trace_context::reservation(tracing, sku_id, &body.request_id, "error");
        ApiError::unavailable("redis", e)
    })?;
    if held_nothing(&outcome) {
        pass_gate::give_back(&state, claimed).await;
    }
    if took_the_last_units(&outcome) {
        flag_sold_out(&state, sku_id, user_id);
    }
    refill_ahead(&state, sku_id, &outcome);
    let (label, response) = answer(&state, sku_id, outcome).await;
    metrics::counter!("stockd_reservations_total", "result" => label).increment(1);
    trace_context::reservation(tracing, sku_id, &body.request_id, label);
    metrics::histogram!("stockd_reserve_duration_seconds").record(started.elapsed().as_secs_f64());
    response
}

/// The reservation's claim on the buyer's hold budget (off: no call); its
/// 409 (`HOLD_BUDGET_EXCEEDED`, or `LIMIT_EXCEEDED` first) counted like the
/// script's refusals.
async fn claim_budget(
    state: &ApiState,
    sku_id: SkuId,
    request_id: &RequestId,
    user_id: UserId,
    count: u32,
) -> Result<budget::Claim, ApiError> {
    let line = BudgetLine {
        sku_id,
        hold_id: request_id.clone(),
        units: count,
    };
    let hold = HoldRef::Reservation { sku_id, request_id };
    let claimed = budget::claim(state, user_id, vec![line], &hold, |_, err| err).await;
    let label = match &claimed {
        Err(ApiError::HoldBudgetExceeded { .. }) => "hold_budget_exceeded",
        Err(ApiError::LimitExceeded { .. }) => "limit_exceeded",
        Err(_) => "error",
        Ok(_) => return claimed,
    };
    metrics::counter!("stockd_reservations_total", "result" => label).increment(1);
    claimed
}

/// Whether the hold is live once the script answered: held now, a replay
/// of a hold still held, or not known (Redis failed mid-call).
fn leaves_it_live(outcome: &Result<ReserveOutcome, RedisError>) -> bool {
    match outcome {
        Ok(ReserveOutcome::Reserved { .. }) | Err(_) => true,
        Ok(ReserveOutcome::Replayed { reservation }) => {
            reservation.status == ReservationStatus::Reserved
        }
        Ok(_) => false,
    }
}

/// The script refused and wrote no hold under this id (a replay, a
/// mismatch and another client's id name a hold that exists).
fn held_nothing(outcome: &ReserveOutcome) -> bool {
    !matches!(
        outcome,
        ReserveOutcome::Reserved { .. }
            | ReserveOutcome::Replayed { .. }
            | ReserveOutcome::Mismatch
            | ReserveOutcome::Taken
    )
}

/// The SKU just sold out, or was found sold out.
fn took_the_last_units(outcome: &ReserveOutcome) -> bool {
    match outcome {
        ReserveOutcome::SoldOut => true,
        ReserveOutcome::Reserved {
            available_after, ..
        } => *available_after == 0,
        _ => false,
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

/// The answer to the script's outcome, with its metric label: the
/// outcome's, or for a refusal what [`refusal`] tells (a SKU missing from
/// Redis is counted by what it turned out to be).
async fn answer(
    state: &ApiState,
    sku_id: SkuId,
    outcome: ReserveOutcome,
) -> (&'static str, Result<HttpResponse, ApiError>) {
    let label = outcome.label();
    let why = match outcome {
        ReserveOutcome::Reserved {
            reservation,
            outbox,
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
                    .publish_traced(stream, outbox, msg, trace, Some(available_after as i64))
                    .await;
                let outcome = published
                    .as_ref()
                    .map_or_else(|e| e.label(), |()| "confirmed");
                otel::end(span, outcome, published.is_err());
                published.is_ok()
            };
            let confirmed = hand_off(state, publish).await;
            let location = format!("/v1/skus/{sku_id}/reservations/{}", reservation.request_id);
            let view = ReservationView::new(&reservation, None);
            return (label, Ok(held(confirmed, location, view)));
        }
        ReserveOutcome::Replayed { reservation } => {
            let view = ReservationView::new(&reservation, None);
            return (label, Ok(replayed(view, None)));
        }
        ReserveOutcome::LimitExceeded { bought, limit } => {
            LineRefusal::LimitExceeded { bought, limit }
        }
        ReserveOutcome::LapseLimit { lapsed, max } => LineRefusal::LapseLimit { lapsed, max },
        ReserveOutcome::Gated(why) => LineRefusal::Gated(why),
        ReserveOutcome::PassUsed => {
            pass_gate::count_used();
            return (label, Err(ApiError::PassUsed));
        }
        ReserveOutcome::SoldOut => LineRefusal::SoldOut,
        ReserveOutcome::Insufficient { available } => LineRefusal::Insufficient { available },
        ReserveOutcome::NotLoaded => LineRefusal::NotLoaded,
        ReserveOutcome::RateLimited { retry_after_ms } => {
            LineRefusal::RateLimited { retry_after_ms }
        }
        ReserveOutcome::Mismatch => return (label, Err(ApiError::IdempotencyMismatch)),
        ReserveOutcome::Taken => return (label, Err(ApiError::IdTaken)),
        ReserveOutcome::Backpressure => {
            return (label, Err(ApiError::Unavailable(BACKPRESSURE.into())));
        }
        ReserveOutcome::Rebalancing => {
            let why = "the SKU's stock is moving between its buckets; retry shortly";
            return (label, Err(ApiError::Unavailable(why.into())));
        }
    };
    let (label, err) = refusal(state, sku_id, why).await;
    (label, Err(err))
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
    let request_id = request_from(&req)?;
    let db = &state.res.db;
    let (in_redis, in_mysql) = copies(
        scope.requester(),
        state
            .res
            .redis
            .reservations()
            .reservation(sku_id, &request_id),
        db.bounded(async {
            let mut conn = db.conn().await?;
            ledger::find(&mut conn, sku_id, &request_id).await
        }),
        ApiError::ReservationNotFound,
    )
    .await?;
    let view = match (in_redis, in_mysql) {
        // MySQL decides final states; Redis may lag behind a transition.
        (Some(mut r), Some(row)) => {
            r.status = row.status;
            ReservationView::new(&r, Some(true))
        }
        (Some(r), None) => ReservationView::new(&r, Some(false)),
        (None, Some(row)) => ReservationView::new(&row.to_reservation(), Some(true)),
        (None, None) => unreachable!("`copies` answers 404 when neither store has it"),
    };
    Ok(HttpResponse::Ok().json(view))
}
