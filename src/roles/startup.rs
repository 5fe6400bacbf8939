//! Starting while a store is down: a role binds its probe port, answers
//! `/livez` 200 and `/readyz` 503 (both `"status": "starting"` with the store it
//! waits for; any other route 503 UNAVAILABLE), and retries [`Resources::connect`] with a capped exponential back-off
//! until MySQL, Redis and RabbitMQ all answer — instead of exiting.
//!
//! Why not exit and let the supervisor restart: under Kubernetes an exiting
//! container goes into CrashLoopBackOff, whose restart delay doubles up to five
//! minutes, so a store outage during a roll-out would keep pods down for minutes
//! after the store came back. Waiting in-process retries at most
//! [`RETRY_MAX`] apart, and the pod simply stays not-ready meanwhile. The wait
//! is logged as an outage (`health::outage`: one line when it starts, a summary
//! every 10 s, one line when it ends), never one line per attempt.
//!
//! One-shot jobs (`migrate`, `audit`, …) still fail at once: their caller
//! (an operator, a Job with a back-off limit) decides whether to try again.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpResponse, HttpServer};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::health::outage;
use crate::resources::Resources;
use crate::roles::api::problem::ApiError;

/// First pause after a failed connect: a store that restarts with the pod is
/// usually back within a second.
const RETRY_FIRST: Duration = Duration::from_millis(250);
/// The cap of the doubling pause: a store that comes back is used within 5 s,
/// while a long outage costs one connect attempt per store every 5 s.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// The store a starting role waits for, shown by its `/readyz`.
type Waiting = Arc<Mutex<&'static str>>;

/// Connects the role's resources, waiting for unreachable stores; `None` when
/// `cancel` fired first (SIGTERM while waiting: exit cleanly). While it waits,
/// `probe` (the role's http.bind or metrics.bind, already bound) answers the
/// probes; `None` (a TLS listener: plain HTTP would be refused there) leaves
/// connections queued until the role serves them itself.
pub async fn connect_when_reachable(
    settings: &Settings,
    name: &str,
    probe: Option<&TcpListener>,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<Resources>> {
    let waiting: Waiting = Arc::new(Mutex::new("mysql"));
    let stop = cancel.child_token();
    let server = match probe {
        Some(listener) => Some(serve_starting(listener.try_clone()?, &waiting, &stop)?),
        None => None,
    };
    let mut pause = RETRY_FIRST;
    let mut failed: Vec<&'static str> = Vec::new();
    let connected = loop {
        match Resources::connect(settings.clone(), name).await {
            Ok(res) => break Some(res),
            Err(err) => {
                *waiting.lock().expect("lock poisoned") = err.dependency;
                outage::failed(err.dependency, &err);
                if !failed.contains(&err.dependency) {
                    failed.push(err.dependency);
                }
            }
        }
        if !crate::shutdown::sleep_or_cancel(pause, cancel).await {
            break None;
        }
        pause = (pause * 2).min(RETRY_MAX);
    };
    stop.cancel();
    if let Some(server) = server {
        // Stopped gracefully: an in-flight probe gets its answer first.
        server.await??;
    }
    if connected.is_some() {
        for dependency in failed {
            outage::answered(dependency);
        }
    }
    Ok(connected)
}

/// The probe server of a starting role, on a clone of its listener (the role
/// serves the original once connected, so the port never closes).
fn serve_starting(
    listener: TcpListener,
    waiting: &Waiting,
    stop: &CancellationToken,
) -> std::io::Result<tokio::task::JoinHandle<std::io::Result<()>>> {
    let waiting = waiting.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(web::Data::new(waiting.clone()))
            .route("/readyz", web::get().to(readyz))
            .route("/livez", web::get().to(livez))
            .default_service(web::to(starting))
    })
    .workers(1)
    .disable_signals()
    .listen(listener)?
    .run();
    let handle = server.handle();
    let stop = stop.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        handle.stop(true).await;
    });
    Ok(tokio::spawn(server))
}

/// 200: the process runs (a liveness probe must not restart a waiting role),
/// but `"starting"`, not `"ok"`: it serves nothing else yet.
async fn livez(waiting: web::Data<Waiting>) -> HttpResponse {
    let dependency = *waiting.lock().expect("lock poisoned");
    HttpResponse::Ok().json(serde_json::json!({
        "status": "starting",
        "waiting_for": dependency,
    }))
}

/// Every other route: 503 UNAVAILABLE with Retry-After, as when a store fails later.
async fn starting(waiting: web::Data<Waiting>) -> HttpResponse {
    let dependency = *waiting.lock().expect("lock poisoned");
    let why = format!("stockd is starting: waiting for {dependency}; retry shortly");
    actix_web::ResponseError::error_response(&ApiError::Unavailable(why))
}

async fn readyz(waiting: web::Data<Waiting>) -> HttpResponse {
    let dependency = *waiting.lock().expect("lock poisoned");
    HttpResponse::ServiceUnavailable().json(serde_json::json!({
        "status": "starting",
        "waiting_for": dependency,
    }))
}
