//! Route table of the HTTP API (contract §6) and the extractor error handlers that
//! turn malformed input into 400 problem+json before any handler runs.

pub mod adjustments;
pub mod admin;
pub mod asyncapi;
pub mod console;
pub mod contract;
pub mod dlq;
pub mod health;
pub mod holds;
pub mod lifecycle;
mod mirrors;
pub mod openapi;
pub mod passes;
pub mod skus;

use actix_web::{web, HttpRequest, HttpResponse, Resource};

use super::problem::ApiError;
use crate::domain::SkuId;

/// Which routes a listener serves (`admin.bind` splits them over two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteSet {
    /// Everything on one listener (`admin.bind` unset).
    All,
    /// The public listener when `admin.bind` is set: no `/v1/admin/*`, no `/metrics`.
    Public,
    /// The admin listener: `/v1/admin/*`, `/metrics`, `/livez`.
    Admin,
}

pub fn register(cfg: &mut web::ServiceConfig, set: RouteSet) {
    if set != RouteSet::Admin {
        register_public(cfg);
    }
    if set != RouteSet::Public {
        register_admin(cfg);
    }
    if set == RouteSet::Admin {
        cfg.service(resource("/livez", "GET").route(web::get().to(health::livez)));
    }
    cfg.default_service(web::to(not_found));
}

fn register_public(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/v1/skus/{sku_id}/reservations", "POST")
            .route(web::post().to(holds::reservation::reserve)),
    )
    .service(
        resource("/v1/skus/{sku_id}/reservations/{request_id}", "GET")
            .route(web::get().to(holds::reservation::get)),
    )
    .service(
        resource(
            "/v1/skus/{sku_id}/reservations/{request_id}/confirm",
            "POST",
        )
        .route(web::post().to(lifecycle::confirm_reservation)),
    )
    .service(
        resource("/v1/skus/{sku_id}/reservations/{request_id}/cancel", "POST")
            .route(web::post().to(lifecycle::cancel_reservation)),
    )
    .service(
        resource("/v1/skus/{sku_id}/reservations/{request_id}/extend", "POST")
            .route(web::post().to(lifecycle::extend_reservation)),
    )
    .service(resource("/v1/orders", "POST").route(web::post().to(holds::order::place)))
    .service(resource("/v1/orders/{order_id}", "GET").route(web::get().to(holds::order::get)))
    .service(
        resource("/v1/orders/{order_id}/confirm", "POST")
            .route(web::post().to(lifecycle::confirm_order)),
    )
    .service(
        resource("/v1/orders/{order_id}/cancel", "POST")
            .route(web::post().to(lifecycle::cancel_order)),
    )
    .service(
        resource("/v1/orders/{order_id}/extend", "POST")
            .route(web::post().to(lifecycle::extend_order)),
    )
    .service(resource("/v1/skus/{sku_id}", "GET").route(web::get().to(skus::get)))
    .service(resource("/v1/passes", "POST").route(web::post().to(passes::issue)))
    .service(resource("/livez", "GET").route(web::get().to(health::livez)))
    .service(resource("/readyz", "GET").route(web::get().to(health::readyz)))
    .service(resource("/openapi.json", "GET").route(web::get().to(openapi::serve)))
    .service(resource("/asyncapi.json", "GET").route(web::get().to(asyncapi::serve)));
}

fn register_admin(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/v1/admin/skus/{sku_id}", "PUT").route(web::put().to(admin::put_sku)))
        .service(
            resource("/v1/admin/skus/{sku_id}/warmup", "POST").route(web::post().to(admin::warmup)),
        )
        .service(
            resource("/v1/admin/skus/{sku_id}/adjustments", "POST")
                .route(web::post().to(adjustments::adjust)),
        )
        .service(
            resource("/v1/admin/skus/{sku_id}/movements", "GET")
                .route(web::get().to(adjustments::list)),
        )
        .service(resource("/v1/admin/dlq", "GET").route(web::get().to(dlq::list)))
        .service(resource("/v1/admin/dlq/replay", "POST").route(web::post().to(dlq::replay)))
        .service(
            resource("/v1/admin/reconcile", "GET, POST")
                .route(web::post().to(admin::reconcile_now))
                .route(web::get().to(admin::last_reconcile)),
        )
        .service(resource("/metrics", "GET").route(web::get().to(health::metrics)))
        .service(resource("/v1/admin/overview", "GET").route(web::get().to(console::overview)))
        .service(resource("/console", "GET").route(web::get().to(console::page)))
        .service(resource("/console/console.js", "GET").route(web::get().to(console::script)))
        .service(resource("/console/console.css", "GET").route(web::get().to(console::style)));
}

/// A route whose other methods answer 405 problem+json with `Allow: {allow}`.
fn resource(path: &str, allow: &'static str) -> Resource {
    web::resource(path).default_service(web::to(move || async move {
        Err::<HttpResponse, _>(ApiError::MethodNotAllowed(allow))
    }))
}

async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::RouteNotFound)
}

/// JSON bodies: at most `limit` bytes, and only as `application/json` (or a
/// `+json` type): a body without that `Content-Type` is 415 (contract §6), so
/// no form post of a browser page can pass as a reservation.
pub fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(limit)
        .content_type_required(true)
        .error_handler(|err, _req| match err {
            actix_web::error::JsonPayloadError::ContentType => {
                ApiError::UnsupportedMediaType.into()
            }
            err => ApiError::InvalidRequest(format!("invalid JSON body: {err}")).into(),
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

/// The `{order_id}` path segment, validated (the `request_id` format).
pub fn order_from(req: &HttpRequest) -> Result<crate::domain::RequestId, ApiError> {
    let raw = req.match_info().get("order_id").unwrap_or_default();
    crate::domain::RequestId::parse(raw).map_err(|e| ApiError::InvalidRequest(e.to_string()))
}

/// The `{sku_id}` path segment, validated.
pub fn sku_from(req: &HttpRequest) -> Result<SkuId, ApiError> {
    let raw = req.match_info().get("sku_id").unwrap_or_default();
    SkuId::parse(raw).map_err(|e| ApiError::InvalidRequest(e.to_string()))
}
