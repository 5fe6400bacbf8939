//! `/metrics` and `/livez` for roles without the HTTP API (`metrics.bind`), so
//! Prometheus scrapes every process the same way.

use std::net::TcpListener;

use actix_web::{web, App, HttpResponse, HttpServer};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

pub fn start(
    listener: TcpListener,
    cancel: CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<std::io::Result<()>>> {
    let handle = crate::telemetry::metrics_handle();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(handle.clone()))
            .route("/metrics", web::get().to(render))
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

async fn render(handle: web::Data<PrometheusHandle>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(handle.render())
}
