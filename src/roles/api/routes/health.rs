//! `/livez` (the process runs), `/readyz` (dependencies answer and we are not
//! draining) and `/metrics` (Prometheus text format).

use std::sync::atomic::Ordering;

use actix_web::{web, HttpResponse};
use serde_json::json;

use crate::roles::api::ApiState;

pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(json!({"status": "ok"}))
}

pub async fn readyz(state: web::Data<ApiState>) -> HttpResponse {
    let draining = state.draining.load(Ordering::SeqCst);
    let redis = state.res.redis.ping().await.is_ok();
    let mysql = state.res.db.ping().await.is_ok();
    let amqp = state.res.publisher.ensure_connected().await.is_ok();
    let ready = !draining && redis && mysql && amqp;
    let body = json!({
        "status": if ready { "ready" } else { "not_ready" },
        "checks": {"redis": redis, "mysql": mysql, "amqp": amqp, "draining": draining},
    });
    if ready {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

pub async fn metrics(state: web::Data<ApiState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(state.metrics.render())
}
