//! Placing and reading a hold, both URL families through one core: `POST
//! /v1/skus/{sku_id}/reservations` holds one line under the client's
//! `request_id` ([`reservation`]), `POST /v1/orders` N lines, all or none,
//! under its `order_id` ([`order`]); each family's `GET` reads its hold back.
//!
//! The two adapters differ in what they ask Redis (one EVALSHA of
//! `reserve.lua`; `order.lua` or the intent protocol of `ops/order_saga.rs`)
//! and in the JSON shape they answer. What a hold's answer is once Redis has
//! spoken is here, once: the sold-out short cut and flags, the refusal of a
//! line, the hand-off to the ledger (with `durability: queue` the answer
//! awaits the broker's confirm, 201 or 202 when late; with `durability:
//! redis` it goes out at once), the replay, and the owner check of a read;
//! and the hold budget per buyer claimed before the admission ([`budget`]).
//! The admission pass of a hold, verified and claimed, is `pass_gate.rs`.

mod budget;
pub mod order;
mod pass_gate;
pub mod reservation;
pub mod sale_gate;

use std::future::Future;

use actix_web::http::header;
use actix_web::HttpResponse;
use serde::Serialize;

use crate::config::Durability;
use crate::db::{ledger::LedgerRow, orders::OrderRow, sku, DbError};
use crate::domain::{RequestId, Requester, Reservation, SkuId, UserId};
use crate::redis::{LineRefusal, OrderRecord, RedisError};
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

/// What a 503 says when the outbox holds too many unpublished entries.
const BACKPRESSURE: &str = "the outbox is full: the broker is not confirming; retry shortly";

/// The first of the hold's SKUs this node knows is sold out for the buyer's
/// bucket: the hold is refused from memory, without a Redis call.
fn short_circuited(
    state: &ApiState,
    user_id: UserId,
    hold_id: &RequestId,
    skus: impl IntoIterator<Item = SkuId>,
) -> Option<SkuId> {
    let board = state.soldout.as_ref()?;
    let buckets = state.res.redis.buckets();
    skus.into_iter().find(|&sku_id| {
        buckets
            .cached_layout(sku_id)
            .is_some_and(|layout| board.short_circuits(&layout, user_id, hold_id))
    })
}

/// The hold a request names: a reservation by its SKU and `request_id`, an
/// order by its `order_id`.
pub(super) enum HoldRef<'a> {
    Reservation {
        sku_id: SkuId,
        request_id: &'a RequestId,
    },
    Order {
        order_id: &'a RequestId,
    },
}

/// Whether Redis holds the record of `hold`: then the request is its
/// replay. The one lookup behind the three places that let a replay
/// through a refusal — the sale gate after the close, the pass gate for an
/// expired pass, the hold budget over its cap — each asking only then.
async fn in_redis(state: &ApiState, hold: &HoldRef<'_>) -> Result<bool, ApiError> {
    let redis = &state.res.redis;
    let found = match hold {
        HoldRef::Reservation { sku_id, request_id } => {
            (redis.reservations().record(*sku_id, request_id).await).map(|r| r.is_some())
        }
        HoldRef::Order { order_id } => redis.orders().record(order_id).await.map(|r| r.is_some()),
    };
    found.map_err(|e| ApiError::unavailable("redis", e))
}

/// A line took its SKU's last units, or was refused sold out: flag the
/// buyer's bucket locally without waiting for the Pub/Sub event. Off the
/// response path.
fn flag_sold_out(state: &ApiState, sku_id: SkuId, user_id: UserId) {
    let Some(board) = &state.soldout else {
        return;
    };
    let bucket = state.res.redis.buckets().cached_bucket_of(sku_id, user_id);
    if let Some(bucket) = bucket {
        if !board.is_bucket_flagged(sku_id, bucket) {
            let board = board.clone();
            tokio::spawn(async move { board.refresh(sku_id, bucket).await });
        }
    }
}

/// Why a line was refused, as the answer and its metric label.
async fn refusal(state: &ApiState, sku_id: SkuId, why: LineRefusal) -> (&'static str, ApiError) {
    match why {
        LineRefusal::Gated(why) => (why.label(), sale_gate::answer(state, why)),
        LineRefusal::SoldOut => ("sold_out", ApiError::SoldOut),
        LineRefusal::Insufficient { available } => {
            ("insufficient", ApiError::InsufficientStock { available })
        }
        LineRefusal::LimitExceeded { bought, limit } => {
            ("limit_exceeded", ApiError::LimitExceeded { bought, limit })
        }
        LineRefusal::LapseLimit { lapsed, max } => {
            ("lapse_limit", ApiError::LapseLimit { lapsed, max })
        }
        LineRefusal::RateLimited { retry_after_ms } => (
            "rate_limited",
            ApiError::rate_limited("user", retry_after_ms),
        ),
        // A SKU missing from Redis is counted by what it turned out to be.
        LineRefusal::NotLoaded => match not_loaded(state, sku_id).await {
            err @ ApiError::SkuNotFound(_) => ("not_found", err),
            err => ("not_loaded", err),
        },
        LineRefusal::Split => (
            "unsupported",
            ApiError::Unavailable(format!(
                "SKU {sku_id} is split into stock buckets and its layout moved while the \
                 order was held; retry"
            )),
        ),
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

/// Hands a held hold to the pipeline; true when the broker confirmed it
/// (always, with `durability: redis`, where the publish runs on after the
/// answer).
async fn hand_off(state: &ApiState, publish: impl Future<Output = bool> + Send + 'static) -> bool {
    match state.res.settings.reservation.durability {
        Durability::Redis => {
            tokio::spawn(publish);
            true
        }
        Durability::Queue => publish.await,
    }
}

/// 201 when the broker confirmed the hand-off, else 202: never undo on a
/// late confirm, the hold stands in the outbox and the relay will publish it.
fn held(confirmed: bool, location: String, view: impl Serialize) -> HttpResponse {
    let mut response = if confirmed {
        HttpResponse::Created()
    } else {
        HttpResponse::Accepted()
    };
    response
        .insert_header((header::LOCATION, location))
        .json(view)
}

/// 200 with `Idempotent-Replayed`: the hold as the first request made it
/// (an order's also names its URL).
fn replayed(view: impl Serialize, location: Option<String>) -> HttpResponse {
    let mut response = HttpResponse::Ok();
    response.insert_header(("Idempotent-Replayed", "true"));
    if let Some(location) = location {
        response.insert_header((header::LOCATION, location));
    }
    response.json(view)
}

/// A copy of a hold that records the client which made it.
trait Owned {
    /// None: a hold of no one, anyone's to read.
    fn client(&self) -> Option<&str>;
}

impl Owned for Reservation {
    fn client(&self) -> Option<&str> {
        self.client.as_deref()
    }
}

impl Owned for LedgerRow {
    fn client(&self) -> Option<&str> {
        self.client.as_deref()
    }
}

impl Owned for OrderRecord {
    fn client(&self) -> Option<&str> {
        self.client.as_deref()
    }
}

impl Owned for OrderRow {
    fn client(&self) -> Option<&str> {
        self.client.as_deref()
    }
}

/// The hold's copies in Redis and in MySQL, read one after the other; the
/// family's 404 when neither is there or either is another client's
/// (contract §6.2: nothing of it is told).
async fn copies<R: Owned, M: Owned>(
    requester: &Requester,
    in_redis: impl Future<Output = Result<Option<R>, RedisError>>,
    in_mysql: impl Future<Output = Result<Option<M>, DbError>>,
    not_found: ApiError,
) -> Result<(Option<R>, Option<M>), ApiError> {
    let in_redis = in_redis
        .await
        .map_err(|e| ApiError::unavailable("redis", e))?;
    let in_mysql = in_mysql
        .await
        .map_err(|e| ApiError::unavailable("mysql", e))?;
    let owners = [
        in_redis.as_ref().and_then(Owned::client),
        in_mysql.as_ref().and_then(Owned::client),
    ];
    let theirs = owners.iter().any(|owner| !requester.may_act_on(*owner));
    if theirs || (in_redis.is_none() && in_mysql.is_none()) {
        return Err(not_found);
    }
    Ok((in_redis, in_mysql))
}
