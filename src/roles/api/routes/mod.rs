//! Route table of the HTTP API (SPEC §6) and the extractor error handlers that
//! turn malformed input into 400 problem+json before any handler runs.

pub mod admin;
pub mod health;
pub mod lifecycle;
pub mod reservations;
pub mod skus;

use actix_web::{web, HttpRequest, HttpResponse};

use super::problem::ApiError;
use crate::domain::SkuId;

pub fn register(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/v1/skus/{sku_id}/reservations")
            .route(web::post().to(reservations::reserve))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/v1/skus/{sku_id}/reservations/{request_id}")
            .route(web::get().to(reservations::get))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/v1/skus/{sku_id}/reservations/{request_id}/confirm")
            .route(web::post().to(lifecycle::confirm))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/v1/skus/{sku_id}/reservations/{request_id}/cancel")
            .route(web::post().to(lifecycle::cancel))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/v1/skus/{sku_id}")
            .route(web::get().to(skus::get))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/v1/admin/skus/{sku_id}")
            .route(web::put().to(admin::put_sku))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/v1/admin/skus/{sku_id}/warmup")
            .route(web::post().to(admin::warmup))
            .default_service(web::to(method_not_allowed)),
    )
    .service(
        web::resource("/v1/admin/reconcile")
            .route(web::post().to(admin::reconcile_now))
            .route(web::get().to(admin::last_reconcile))
            .default_service(web::to(method_not_allowed)),
    )
    .route("/livez", web::get().to(health::livez))
    .route("/readyz", web::get().to(health::readyz))
    .route("/metrics", web::get().to(health::metrics))
    .default_service(web::to(not_found));
}

async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::RouteNotFound)
}

async fn method_not_allowed() -> Result<HttpResponse, ApiError> {
    Err(ApiError::MethodNotAllowed)
}

pub fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(limit)
        .content_type_required(false)
        .error_handler(|err, _req| {
            ApiError::InvalidRequest(format!("invalid JSON body: {err}")).into()
        })
}

pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default()
        .error_handler(|err, _req| ApiError::InvalidRequest(format!("invalid query: {err}")).into())
}

pub fn path_config() -> web::PathConfig {
    web::PathConfig::default()
        .error_handler(|err, _req| ApiError::InvalidRequest(format!("invalid path: {err}")).into())
}

/// The `{request_id}` path segment, validated.
pub fn request_from(req: &HttpRequest) -> Result<crate::domain::RequestId, ApiError> {
    let raw = req.match_info().get("request_id").unwrap_or_default();
    crate::domain::RequestId::parse(raw).map_err(|e| ApiError::InvalidRequest(e.to_string()))
}

/// The `{sku_id}` path segment, validated.
pub fn sku_from(req: &HttpRequest) -> Result<SkuId, ApiError> {
    let raw = req.match_info().get("sku_id").unwrap_or_default();
    SkuId::parse(raw).map_err(|e| ApiError::InvalidRequest(e.to_string()))
}
