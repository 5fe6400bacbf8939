//! `/metrics`, `/livez` and `/readyz` for roles without the HTTP API
//! (`metrics.bind`), so Prometheus scrapes every process the same way and an
//! orchestrator sees a worker's MySQL breaker: `/readyz` answers 503 with
//! `{"status":"not_ready","checks":{"mysql_breaker_closed":false}}` while the
//! consumer/closer hold their deliveries during a MySQL outage.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::{web, App, HttpResponse, HttpServer};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::health::Breaker;

pub fn start(
    listener: TcpListener,
    breaker: Arc<Breaker>,
    cancel: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<std::io::Result<()>>> {
    let handle = crate::telemetry::metrics_handle();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(handle.clone()))
            .app_data(web::Data::new(breaker.clone()))
            .route("/metrics", web::get().to(render))
            .route("/readyz", web::get().to(readyz))
            .route(
                "/livez",
                web::get()
                    .to(|| async { HttpResponse::Ok().json(serde_json::json!({"status": "ok"})) }),
            )
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run();
    let stop = server.handle();
    tokio::spawn(async move {
        cancel.cancelled().await;
        stop.stop(true).await;
    });
    Ok(tokio::spawn(server))
}

async fn readyz(breaker: web::Data<Arc<Breaker>>) -> HttpResponse {
    let closed = !breaker.is_open();
    let body = serde_json::json!({
        "status": if closed { "ready" } else { "not_ready" },
        "checks": {"mysql_breaker_closed": closed},
    });
    if closed {
        HttpResponse::Ok().json(body)
    } else {
        HttpResponse::ServiceUnavailable().json(body)
    }
}

async fn render(handle: web::Data<PrometheusHandle>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(handle.render())
}
