//! Per-request telemetry: a request id (the client's `X-Request-Id` when it is
//! sane, a fresh UUID otherwise) and the trace and span ids (`trace_context`)
//! on a tracing span around the handler, and on the response; request count and latency per route pattern and status. The metric
//! label is the matched pattern (`/v1/skus/{sku_id}/reservations`), never the raw
//! path, so the number of series stays bounded whatever clients send; the
//! `client` label is the configured name of the authenticated client
//! (`auth.clients`), `anonymous` without one — bounded by the config too.

use std::future::Future;
use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{Error, HttpMessage};
use futures_util::future::Either;
use opentelemetry::context::FutureExt as _;
use tracing::Instrument;

use super::auth::{ClientName, ANONYMOUS};
use super::trace_context;

/// Longest client-supplied request id kept; longer ones are replaced.
const REQUEST_ID_MAX_LEN: usize = 64;

const X_REQUEST_ID: &str = "x-request-id";

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

/// `wrap_fn` middleware body.
pub fn record<S>(
    req: ServiceRequest,
    srv: &S,
) -> impl Future<Output = Result<ServiceResponse<BoxBody>, Error>>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = Error>,
{
    let started = Instant::now();
    let id = request_id(&req);
    let trace = trace_context::begin(&req);
    let method = req.method().clone();
    let span = tracing::info_span!("http.request", request.id = %id, http.method = %method,
        trace_id = %trace.trace_id, span_id = %trace.span_id);
    let trace_cx = trace.cx.clone();
    let call = match trace.cx {
        Some(cx) => Either::Left(srv.call(req).with_context(cx)),
        None => Either::Right(srv.call(req)),
    };
    async move {
        let mut response = call.await?;
        let route = response.request().match_pattern().unwrap_or_else(|| "unmatched".to_string());
        let status = response.status().as_u16();
        let client = client_label(&response);
        trace_context::finish(trace_cx, method.as_str(), &route, status);
        let elapsed = started.elapsed();
        tracing::debug!(http.route = %route, http.status = status, duration_ms = elapsed.as_millis() as u64, "http.request: done");
        metrics::counter!("stockd_http_requests_total", "route" => route.clone(), "status" => status.to_string(), "client" => client.clone())
            .increment(1);
        metrics::histogram!("stockd_http_request_duration_seconds", "route" => route, "client" => client).record(elapsed.as_secs_f64());
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

/// The authenticated client's name (set by the auth gate), else `anonymous`.
fn client_label(response: &ServiceResponse<BoxBody>) -> metrics::SharedString {
    match response.request().extensions().get::<ClientName>() {
        Some(ClientName(name)) => metrics::SharedString::from(name.to_string()),
        None => metrics::SharedString::const_str(ANONYMOUS),
    }
}
