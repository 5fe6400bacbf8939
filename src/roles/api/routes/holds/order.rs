//! `POST /v1/orders` and `GET /v1/orders/{order_id}`: a hold of N lines on
//! as many SKUs, all or nothing, named by its `order_id`
//! (docs/architecture.md, "Orders").
//!
//! The hot path is one EVALSHA of `order.lua` (every line held or none; on a
//! Redis Cluster or with a line on a split SKU, the intent protocol of
//! `ops/order_saga.rs`), then the hand-off of [`super`]: one deduction
//! through the group commit naming every line.

use actix_web::{web, HttpRequest, HttpResponse};

use super::super::contract::{
    Forbidden, IdempotencyMismatch, InvalidRequest, OrderForbidden, OrderNotFound, OrderPath,
    OrderRefused, OrderSkuNotFound, RateLimited, Unauthenticated, Unavailable,
    UnsupportedMediaType,
};
use super::super::order_from;
use super::pass_gate::{self, ClaimedPass};
use super::{
    budget, copies, flag_sold_out, hand_off, held, refusal, replayed, sale_gate, short_circuited,
    HoldRef, BACKPRESSURE,
};
use crate::db::orders;
use crate::domain::{
    Deduction, OrderLines, RequestId, Requester, ReservationStatus, SkuId, UserId,
};
use crate::otel;
use crate::outbox::OrderLineEntry;
use crate::redis::{BudgetLine, HeldLine, LineRefusal, OrderOutcome};
use crate::roles::api::auth::{Granted, Read, Reserve};
use crate::roles::api::hold_views::{OrderBody, OrderView, StatusView};
use crate::roles::api::problem::ApiError;
use crate::roles::api::trace_context;
use crate::roles::api::ApiState;

/// Reserve every line of an order, or none.
///
/// Idempotent on `order_id`: an identical retry replays the first answer
/// (200 with `Idempotent-Replayed: true`); the same id with another user or
/// other lines is 422. Each line counts against its SKU's `limit_per_user`
/// together with the buyer's single reservations, and a line on a SKU where
/// the buyer's holds lapsed unpaid `limits.max_lapsed_holds` times is
/// refused (409 `LAPSE_LIMIT`). The buyer's live units across every SKU
/// and the order's lines together are held to `limits.buyer_max_live_units`
/// (409 `HOLD_BUDGET_EXCEEDED`, no `line` member). Needs a client token with
/// scope `reserve` when `auth.required` is true.
#[utoipa::path(
    post,
    path = "/v1/orders",
    tag = "orders",
    operation_id = "place_order",
    security(("client_token" = ["reserve"])),
    request_body(content = OrderBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Every line is held, and the hand-off to the ledger is confirmed by the broker",
         body = OrderView,
         headers(("Location" = String, description = "URL of the order"))),
        (status = 202, description = "Every line is held; the broker has not confirmed the hand-off yet, the outbox relay will",
         body = OrderView,
         headers(("Location" = String, description = "URL of the order"))),
        (status = 200, description = "An identical replay: the order as the first request made it",
         body = OrderView,
         headers(("Idempotent-Replayed" = String, description = "Always `true`"))),
        (status = 400, response = InvalidRequest),
        (status = 415, response = UnsupportedMediaType),
        (status = 401, response = Unauthenticated),
        (status = 403, response = OrderForbidden),
        (status = 404, response = OrderSkuNotFound),
        (status = 409, response = OrderRefused),
        (status = 422, response = IdempotencyMismatch),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn place(
    scope: Granted<Reserve>,
    state: web::Data<ApiState>,
    body: web::Json<OrderBody>,
) -> Result<HttpResponse, ApiError> {
    let started = std::time::Instant::now();
    let settings = &state.res.settings;
    let (user_id, lines) =
        body.validate(settings.orders.max_lines, settings.reservation.max_count)?;
    let order_id = &body.order_id;
    let skus: Vec<SkuId> = lines.lines().iter().map(|l| l.sku_id).collect();
    let hold_ref = HoldRef::Order { order_id };
    let has_pass = body.pass.is_some();
    let early = sale_gate::early_refusal(&state, &skus, has_pass, &hold_ref).await?;
    if let Some((sku_id, why)) = early {
        metrics::counter!("stockd_orders_total", "result" => why.label()).increment(1);
        return Err(refused(sku_id, sale_gate::answer(&state, why)));
    }
    let pass = body.pass.as_deref();
    let admitted = pass_gate::admit(&state, pass, user_id, &skus, &hold_ref).await?;
    let (label, response) = match short_circuited(&state, user_id, order_id, skus) {
        Some(sku_id) => ("sold_out", Err(refused(sku_id, ApiError::SoldOut))),
        None => {
            let claimed = pass_gate::claim(&state, user_id, &admitted, &hold_ref).await?;
            match claim_budget(&state, order_id, user_id, &lines).await {
                Ok(budget) => {
                    let admission = Admission {
                        carries_pass: admitted.carries_pass(),
                        pass: claimed,
                        budget,
                    };
                    let requester = scope.requester();
                    hold(&state, order_id, user_id, &lines, requester, admission).await
                }
                Err(err) => {
                    pass_gate::give_back(&state, claimed).await;
                    let label = match &err {
                        ApiError::HoldBudgetExceeded { .. } => "hold_budget_exceeded",
                        ApiError::OrderRefused { .. } => "limit_exceeded",
                        _ => "error",
                    };
                    (label, Err(err))
                }
            }
        }
    };
    metrics::counter!("stockd_orders_total", "result" => label).increment(1);
    trace_context::order(&state.res.tracing, order_id, label);
    metrics::histogram!("stockd_order_lines").record(lines.len() as f64);
    metrics::histogram!("stockd_order_duration_seconds").record(started.elapsed().as_secs_f64());
    response
}

/// The order's claim on the buyer's hold budget, one line per SKU (off: no
/// call). A Redis failure is an error of its own, not a refusal.
async fn claim_budget(
    state: &ApiState,
    order_id: &RequestId,
    user_id: UserId,
    lines: &OrderLines,
) -> Result<budget::Claim, ApiError> {
    let budget_lines = (lines.lines().iter())
        .map(|line| BudgetLine {
            sku_id: line.sku_id,
            hold_id: order_id.clone(),
            units: line.count,
        })
        .collect();
    let hold = HoldRef::Order { order_id };
    budget::claim(state, user_id, budget_lines, &hold, refused).await
}

/// The order script, then the answer; with the outcome's metric label.
/// The budget's `claim` is settled once the answer says whether the order
/// is live.
async fn hold(
    state: &ApiState,
    order_id: &RequestId,
    user_id: UserId,
    lines: &OrderLines,
    requester: &Requester,
    admission: Admission,
) -> (&'static str, Result<HttpResponse, ApiError>) {
    let Admission {
        carries_pass,
        pass,
        budget,
    } = admission;
    let (label, response, live) = answer(
        state,
        order_id,
        user_id,
        lines,
        requester,
        carries_pass,
        pass,
    )
    .await;
    budget.settle(state, live).await;
    (label, response)
}

/// What the order's admission carries into the script: whether it carries
/// a verified pass, the pass it claimed and its claim on the hold budget,
/// each given back when the order is refused.
struct Admission {
    carries_pass: bool,
    pass: Option<ClaimedPass>,
    budget: budget::Claim,
}

/// The order script, then the answer, with its metric label and whether
/// the order is live after it (held, a replay of a held order, or not known).
async fn answer(
    state: &ApiState,
    order_id: &RequestId,
    user_id: UserId,
    lines: &OrderLines,
    requester: &Requester,
    carries_pass: bool,
    claimed: Option<ClaimedPass>,
) -> (&'static str, Result<HttpResponse, ApiError>, bool) {
    let hold_timeout_ms = state.res.settings.orders.hold_timeout_ms;
    let redis = &state.res.redis;
    let redis_span = trace_context::order_redis_span(&state.res.tracing, order_id, lines.len());
    let outcome = (crate::ops::order_saga::place(
        redis,
        order_id,
        user_id,
        lines,
        hold_timeout_ms,
        requester,
        carries_pass,
    ))
    .await;
    let label = outcome.as_ref().map_or("error", OrderOutcome::label);
    otel::end(redis_span, label, outcome.is_err());
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => return ("error", Err(ApiError::unavailable("redis", err)), true),
    };
    if held_nothing(&outcome) {
        pass_gate::give_back(state, claimed).await;
    }
    for sku_id in took_the_last_units(&outcome) {
        flag_sold_out(state, sku_id, user_id);
    }
    let location = format!("/v1/orders/{order_id}");
    let (label, response) = match outcome {
        OrderOutcome::Reserved {
            created_ms,
            expires_ms,
            lines: held_lines,
        } => {
            let client = requester.stamp();
            let msgs =
                Deduction::of_order_by(order_id, user_id, lines, created_ms, expires_ms, client);
            let confirmed = hand_off(state, publish(state, held_lines, msgs)).await;
            let status = ReservationStatus::Reserved;
            let view = OrderView::new(order_id, user_id, lines, status, expires_ms);
            return ("reserved", Ok(held(confirmed, location, view)), true);
        }
        OrderOutcome::Replayed {
            status, expires_ms, ..
        } => {
            let view = OrderView::new(order_id, user_id, lines, status, expires_ms);
            let live = status == ReservationStatus::Reserved;
            return ("replayed", Ok(replayed(view, Some(location))), live);
        }
        OrderOutcome::Mismatch => {
            match stored_in_mysql(state, order_id, user_id, lines, requester).await {
                Ok(Stored::Same(view)) => {
                    let live = view.status == StatusView::Reserved;
                    return ("replayed", Ok(replayed(view, Some(location))), live);
                }
                Ok(Stored::Taken) => ("id_taken", Err(ApiError::IdTaken)),
                Ok(Stored::Other) => ("mismatch", Err(ApiError::IdempotencyMismatch)),
                Err(err) => return ("error", Err(err), true),
            }
        }
        OrderOutcome::Taken => ("id_taken", Err(ApiError::IdTaken)),
        OrderOutcome::Refused { sku_id, why } => {
            let (label, err) = refusal(state, sku_id, why).await;
            match err {
                // Not the line's doing: the answer names no line.
                err @ ApiError::Unavailable(_) => (label, Err(err)),
                err => (label, Err(refused(sku_id, err))),
            }
        }
        OrderOutcome::Backpressure => (
            "backpressure",
            Err(ApiError::Unavailable(BACKPRESSURE.into())),
        ),
        OrderOutcome::Retry(reason) => ("retry", Err(ApiError::Unavailable(reason))),
        OrderOutcome::Unsupported => (
            "unsupported",
            Err(ApiError::Unavailable(
                "orders cannot be held by one script on a Redis Cluster".into(),
            )),
        ),
    };
    (label, response, false)
}

/// The script refused and held no line under this id. Not a `Retry`:
/// another request of the same id is holding or undoing it.
fn held_nothing(outcome: &OrderOutcome) -> bool {
    matches!(
        outcome,
        OrderOutcome::Refused { .. } | OrderOutcome::Backpressure | OrderOutcome::Unsupported
    )
}

/// The SKUs a line just took the last units of, or was refused sold out on.
fn took_the_last_units(outcome: &OrderOutcome) -> Vec<SkuId> {
    match outcome {
        OrderOutcome::Reserved { lines, .. } => lines
            .iter()
            .filter(|l| l.available_after == 0)
            .map(|l| l.sku_id)
            .collect(),
        OrderOutcome::Refused {
            sku_id,
            why: LineRefusal::SoldOut,
        } => vec![*sku_id],
        _ => Vec::new(),
    }
}

/// The order as MySQL stores it, when it is this very order (same buyer,
/// same lines). Asked only when the script answered a mismatch: Redis lost
/// the order record while its lines' records are there (a warm-up rebuilds
/// lines from the ledger, not the order record), and the buyer's retry is
/// still a replay, not a 422.
async fn stored_in_mysql(
    state: &ApiState,
    order_id: &RequestId,
    user_id: UserId,
    lines: &OrderLines,
    requester: &Requester,
) -> Result<Stored, ApiError> {
    let db = &state.res.db;
    let row = db
        .bounded(async {
            let mut conn = db.conn().await?;
            orders::find(&mut conn, order_id).await
        })
        .await
        .map_err(|e| ApiError::unavailable("mysql", e))?;
    Ok(match row {
        Some(row) if !requester.may_act_on(row.client.as_deref()) => Stored::Taken,
        Some(row) if row.user_id == user_id && row.lines == *lines => {
            Stored::Same(OrderView::of_row(&row))
        }
        _ => Stored::Other,
    })
}

/// What MySQL stores under an order id the script found taken.
enum Stored {
    /// This very order: a replay.
    Same(OrderView),
    /// Another client's order (contract §6.2): nothing of it is told.
    Taken,
    /// Another order, or none.
    Other,
}

/// An order's answer naming the line it failed on.
fn refused(sku_id: SkuId, refusal: ApiError) -> ApiError {
    ApiError::OrderRefused {
        sku_id: sku_id.get(),
        refusal: Box::new(refusal),
    }
}

/// The order's publish: one deduction naming every line; true when the
/// broker confirmed it.
fn publish(
    state: &ApiState,
    held: Vec<HeldLine>,
    msgs: Vec<Deduction>,
) -> impl std::future::Future<Output = bool> + Send + 'static {
    let entries: Vec<OrderLineEntry> = held
        .into_iter()
        .zip(msgs)
        .map(|(line, msg)| OrderLineEntry {
            stream: line.stream,
            entry_id: line.entry_id,
            msg,
            available: Some(line.available_after as i64),
        })
        .collect();
    let exchange = &state.res.publisher.topology().reservations_exchange;
    let (span, trace) = trace_context::publish_span(&state.res.tracing, exchange, &entries[0].msg);
    let group_commit = state.group_commit.clone();
    async move {
        let published = group_commit.publish_order(entries, trace).await;
        let outcome = published
            .as_ref()
            .map_or_else(|e| e.label(), |()| "confirmed");
        otel::end(span, outcome, published.is_err());
        published.is_ok()
    }
}

/// Look up an order.
///
/// Needs a client token with scope `read` when `auth.required` is true.
#[utoipa::path(
    get,
    path = "/v1/orders/{order_id}",
    tag = "orders",
    operation_id = "get_order",
    params(OrderPath),
    security(("client_token" = ["read"])),
    responses(
        (status = 200, description = "The order; `persisted` tells whether it is in MySQL yet",
         body = OrderView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = OrderNotFound),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn get(
    scope: Granted<Read>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let order_id = order_from(&req)?;
    let db = &state.res.db;
    let (in_redis, in_mysql) = copies(
        scope.requester(),
        state.res.redis.orders().record(&order_id),
        db.bounded(async {
            let mut conn = db.conn().await?;
            orders::find(&mut conn, &order_id).await
        }),
        ApiError::OrderNotFound,
    )
    .await?;
    // MySQL decides final states; Redis may lag behind a transition.
    let view = match (in_mysql, in_redis) {
        (Some(row), _) => OrderView {
            persisted: Some(true),
            ..OrderView::of_row(&row)
        },
        (None, Some(r)) => OrderView {
            persisted: Some(false),
            ..OrderView::new(&order_id, r.user_id, &r.lines, r.status, r.expires_ms)
        },
        (None, None) => unreachable!("`copies` answers 404 when neither store has it"),
    };
    Ok(HttpResponse::Ok().json(view))
}
