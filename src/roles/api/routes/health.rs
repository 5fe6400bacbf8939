//! `/livez` (the process runs), `/readyz` (dependencies answered the last
//! background check, scripts are loaded and we are not draining; `?verbose`
//! lists each check to an admin) and `/metrics` (Prometheus text format).

use std::sync::atomic::Ordering;

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use super::admin::require_admin;
use crate::roles::api::ApiState;

#[utoipa::path(get, path = "/livez", tag = "operations", operation_id = "livez", responses((status = 200, description = "The process runs", body = crate::roles::api::routes::contract::Liveness)))]
pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

/// Whether this instance should take traffic.
///
/// Readiness as last checked in the background, each store at most once a
/// second: not ready until the first check completed, and at once while
/// draining. `?verbose` adds each check only for `Authorization: Bearer <admin
/// token>` or a client with scope `admin`; any other caller gets the status
/// alone.
#[utoipa::path(get, path = "/readyz", tag = "operations", operation_id = "readyz", params(("verbose" = Option<String>, Query, description = "A flag: when present, with any value or none, and the caller presents the admin credential, the answer lists each check")), responses((status = 200, description = "Ready: dependencies answered, scripts loaded, not draining", body = crate::roles::api::routes::contract::Readiness), (status = 503, description = "Not ready (or draining, or not checked yet); take this instance out of rotation", body = crate::roles::api::routes::contract::Readiness)))]
pub async fn readyz(req: HttpRequest, state: web::Data<ApiState>) -> HttpResponse {
    // The background task's answer (`roles/api/readiness.rs`): no store is
    // touched here, so a loop of probes costs the stores nothing.
    let draining = state.draining.load(Ordering::SeqCst);
    let ready = state.readiness.ready(draining);
    let mut body = json!({"status": if ready { "ready" } else { "not_ready" }});
    let verbose = req
        .query_string()
        .split('&')
        .any(|p| p == "verbose" || p.starts_with("verbose="));
    // The detail names the stores that fail: for operators only; anyone else
    // gets the status alone (no error: the probe stays open).
    if verbose && require_admin(&req, &state).is_ok() {
        let checks = state.readiness.last().unwrap_or_default();
        // Informational, not part of readiness: the api keeps admitting while
        // the workers' breaker holds deliveries (that is what the queue is for).
        let breaker_closed = !state.res.mysql_breaker.is_open();
        body["checks"] = json!({
            "redis": checks.redis, "scripts_loaded": checks.scripts_loaded,
            "mysql": checks.mysql, "amqp": checks.amqp, "not_draining": !draining,
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
