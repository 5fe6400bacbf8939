//! `/livez` (the process runs), `/readyz` (dependencies answer, scripts are
//! loaded and we are not draining; `?verbose` lists each check) and `/metrics`
//! (Prometheus text format).

use std::sync::atomic::Ordering;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use crate::roles::api::ApiState;

#[utoipa::path(get, path = "/livez", tag = "operations", operation_id = "livez", responses((status = 200, description = "The process runs", body = crate::roles::api::routes::contract::Liveness)))]
pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

#[utoipa::path(get, path = "/readyz", tag = "operations", operation_id = "readyz", params(("verbose" = Option<String>, Query, description = "A flag: when present, with any value or none, the answer lists each check")), responses((status = 200, description = "Ready: dependencies answer, scripts loaded, not draining", body = crate::roles::api::routes::contract::Readiness), (status = 503, description = "Not ready (or draining); take this instance out of rotation", body = crate::roles::api::routes::contract::Readiness)))]
pub async fn readyz(req: HttpRequest, state: web::Data<ApiState>) -> HttpResponse {
    let draining = state.draining.load(Ordering::SeqCst);
    let redis = state.res.redis.ping().await.is_ok();
    let scripts = redis && state.res.redis.scripts_loaded().await.unwrap_or(false);
    let mysql = state.res.db.ping().await.is_ok();
    let amqp = state.res.publisher.ensure_connected().await.is_ok();
    let ready = !draining && redis && scripts && mysql && amqp;
    let mut body = json!({"status": if ready { "ready" } else { "not_ready" }});
    if req
        .query_string()
        .split('&')
        .any(|p| p == "verbose" || p.starts_with("verbose="))
    {
        // Informational, not part of readiness: the api keeps admitting while
        // the workers' breaker holds deliveries (that is what the queue is for).
        let breaker_closed = !state.res.mysql_breaker.is_open();
        body["checks"] = json!({
            "redis": redis, "scripts_loaded": scripts, "mysql": mysql, "amqp": amqp, "not_draining": !draining,
            "mysql_breaker_closed": breaker_closed,
        });
    }
    if ready {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

#[utoipa::path(get, path = "/metrics", tag = "operations", operation_id = "metrics", responses((status = 200, description = "Prometheus text exposition format", content_type = "text/plain", body = String)))]
pub async fn metrics(state: web::Data<ApiState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
