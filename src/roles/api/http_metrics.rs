//! Per-request telemetry: a request id (the client's `X-Request-Id` when it is
//! sane, a fresh UUID otherwise) and the trace and span ids (`trace_context`)
//! on a tracing span around the handler, and on the response; request count and latency per route pattern and status. The metric
//! label is the matched pattern (`/v1/skus/{sku_id}/reservations`), never the raw
//! path, so the number of series stays bounded whatever clients send; the
//! `client` label is the configured name of the authenticated client
//! (`auth.clients`), `anonymous` without one — bounded by the config too.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::HttpMessage;
use futures_util::future::Either;
use opentelemetry::context::FutureExt as _;
use tracing::Instrument;

use super::auth::ClientName;
use super::middleware::{Answer, Inner};
use super::{own_task, request_series, trace_context};

/// Longest client-supplied request id kept; longer ones are replaced.
const REQUEST_ID_MAX_LEN: usize = 64;

const X_REQUEST_ID: &str = "x-request-id";

/// The `route` label of a request no route matched.
const UNMATCHED: &str = "unmatched";

/// The route pattern a request is routed to (`None`: no route; `routing.rs`),
/// found once by this middleware, the outermost, and read by the ones inside
/// it (the per-IP guard, the auth gate, the audit trail). Each `match_pattern` call runs actix's route table again,
/// regex by regex: three per request were ~8 % of the api's CPU in a profile
/// of the reserve path (docs/benchmarks-history.md, "Batch admission").
#[derive(Debug, Clone, Copy)]
pub struct MatchedRoute(pub Option<&'static str>);

/// The request's route pattern: the one this middleware found, else found now.
pub fn matched_route(req: &actix_web::HttpRequest) -> Option<&'static str> {
    match req.extensions().get::<MatchedRoute>() {
        Some(MatchedRoute(route)) => *route,
        None => super::routing::route_of(req),
    }
}

fn request_id(req: &ServiceRequest) -> String {
    req.headers()
        .get(X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= REQUEST_ID_MAX_LEN
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
        })
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

/// `wrap_fn` middleware body. The chain inside it (the other middlewares,
/// the handler) runs on a task of its own (`own_task.rs`), inside the
/// request's span and trace context.
pub fn record<S: Inner>(req: ServiceRequest, srv: &S) -> impl Future<Output = Answer>
where
    S::Future: 'static,
{
    let started = Instant::now();
    let id = request_id(&req);
    let trace = trace_context::begin(&req);
    let method = req.method().clone();
    let span = tracing::info_span!("http.request", request.id = %id, http.method = %method,
        trace_id = %trace.trace_id, span_id = %trace.span_id);
    let trace_cx = trace.cx.clone();
    let route = super::routing::route_of(req.request());
    req.extensions_mut().insert(MatchedRoute(route));
    let call = match trace.cx {
        Some(cx) => Either::Left(srv.call(req).with_context(cx)),
        None => Either::Right(srv.call(req)),
    };
    let call = own_task::run(call.instrument(span.clone()));
    async move {
        let mut response = call.await?;
        let route = route.unwrap_or(UNMATCHED);
        let status = response.status().as_u16();
        trace_context::finish(trace_cx, method.as_str(), route, status);
        let elapsed = started.elapsed();
        tracing::debug!(http.route = %route, http.status = status, duration_ms = elapsed.as_millis() as u64, "http.request: done");
        request_series::record(route, status, client_of(&response), elapsed);
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(HeaderName::from_static(X_REQUEST_ID), value);
        }
        if let Ok(value) = HeaderValue::from_str(&trace.trace_id) {
            let name = HeaderName::from_static(trace_context::TRACE_ID_HEADER);
            response.headers_mut().insert(name, value);
        }
        Ok(response)
    }
    .instrument(span)
}

/// The authenticated client's name (set by the auth gate); `None`: anonymous.
fn client_of(response: &ServiceResponse<BoxBody>) -> Option<Arc<str>> {
    let extensions = response.request().extensions();
    extensions
        .get::<ClientName>()
        .map(|ClientName(name)| name.clone())
}

#[cfg(test)]
mod tests {
    use actix_web::test as http_test;
    use actix_web::{web, App, HttpResponse};

    use super::super::audit::capture;
    use super::record;

    async fn logs_a_line() -> HttpResponse {
        tracing::warn!("handler: a line of the request");
        HttpResponse::Ok().finish()
    }

    /// Tracing off: the caller's trace id is answered in `X-Trace-Id` and sits,
    /// with a span id, on the request's log lines (JSON log: the `span` object).
    #[actix_web::test]
    async fn a_request_answers_and_logs_its_trace_id() {
        let (captured, _guard) = capture::audit_log();
        let app = http_test::init_service(
            App::new()
                .wrap_fn(record)
                .route("/x", web::get().to(logs_a_line)),
        )
        .await;
        let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
        let req = http_test::TestRequest::get()
            .uri("/x")
            .insert_header(("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01")))
            .to_request();
        let resp = http_test::call_service(&app, req).await;
        assert_eq!(resp.headers().get("x-trace-id").unwrap(), trace_id);
        let (log, _) = captured.audit_events();
        let line: serde_json::Value = log
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .find(|e: &serde_json::Value| {
                e["fields"]["message"] == "handler: a line of the request"
            })
            .unwrap_or_else(|| panic!("no handler line in {log}"));
        assert_eq!(line["span"]["trace_id"], trace_id, "{line}");
        assert_eq!(
            line["span"]["span_id"].as_str().unwrap().len(),
            16,
            "{line}"
        );
        let fresh =
            http_test::call_service(&app, http_test::TestRequest::get().uri("/x").to_request())
                .await;
        let other = fresh.headers().get("x-trace-id").unwrap().to_str().unwrap();
        assert!(other.len() == 32 && other != trace_id, "{other}");
    }
}
