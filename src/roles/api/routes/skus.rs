//! `GET /v1/skus/{sku_id}`: the buyer-facing stock view, served from Redis.

use actix_web::{web, HttpRequest, HttpResponse};

use super::contract::{
    Forbidden, InvalidRequest, RateLimited, SkuNotFound, SkuPath, Unauthenticated, Unavailable,
};
use super::holds::not_loaded;
use super::sku_from;
use crate::roles::api::auth::{Granted, Read};
use crate::roles::api::problem::ApiError;
use crate::roles::api::views::{SaleView, SkuView, SplitView};
use crate::roles::api::ApiState;

/// The stock of a SKU as buyers see it (served from Redis).
///
/// Needs a client token with scope `read` when `auth.required` is true
/// (contract §6, "Who may call").
#[utoipa::path(
    get,
    path = "/v1/skus/{sku_id}",
    tag = "skus",
    operation_id = "get_sku",
    params(SkuPath),
    security(("client_token" = ["read"])),
    responses(
        (status = 200, description = "The SKU", body = SkuView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 404, response = SkuNotFound),
        (status = 429, response = RateLimited),
        (status = 503, response = Unavailable),
    )
)]
pub async fn get(
    _scope: Granted<Read>,
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    let sku_id = sku_from(&req)?;
    let snapshot = state
        .res
        .redis
        .skus()
        .sku(sku_id)
        .await
        .map_err(|e| ApiError::unavailable("redis", e))?;
    let Some(snapshot) = snapshot else {
        return Err(not_loaded(&state, sku_id).await);
    };
    // From this node's board (memory), as the hold handlers judge them.
    let terms = state.sale.terms(sku_id);
    Ok(HttpResponse::Ok().json(SkuView {
        sku_id: sku_id.get(),
        available: snapshot.available.max(0),
        sold_out: snapshot.sold_out,
        limit_per_user: snapshot.limit_per_user,
        sale: SaleView::of(&terms),
        requires_pass: terms.requires_pass,
        split: SplitView::of(&snapshot),
    }))
}
