//! Every HTTP request's place in a distributed trace: the caller's W3C
//! `traceparent`/`tracestate` continue its trace (or a new one starts), the
//! trace id goes back in `X-Trace-Id`, and the trace and span ids sit on the
//! request's log span, so every log line of the request carries them.
//!
//! With tracing off (no `telemetry.otlp.endpoint`) no span is built: the ids
//! are the caller's trace id (or a random one) and a random span id, still
//! answered and logged, so a log line can be matched with the caller's trace.
//! With tracing on, the server span is the parent of the handler's spans (the
//! Redis script, the publish), through the context the handler runs under.

use actix_web::dev::ServiceRequest;
use actix_web::web;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};

use crate::domain::{Deduction, RequestId, SkuId};
use crate::mq::trace_context::TraceContext;
use crate::otel::{self, propagate, Tracing};
use crate::roles::api::ApiState;

/// The response header holding the request's trace id (32 lower-case hex).
pub const TRACE_ID_HEADER: &str = "x-trace-id";

/// One request's trace: the ids logged and answered, and the server span.
pub struct RequestTrace {
    pub trace_id: String,
    pub span_id: String,
    /// The server span's context; `None` with tracing off.
    pub cx: Option<Context>,
}

/// Starts the request's trace from its headers.
pub fn begin(req: &ServiceRequest) -> RequestTrace {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    let traceparent = header(propagate::TRACEPARENT);
    let tracing = req
        .app_data::<web::Data<ApiState>>()
        .map(|s| &s.res.tracing);
    let Some(tracing) = tracing.filter(|t| t.is_on()) else {
        let random = uuid::Uuid::new_v4().simple().to_string();
        let trace_id = traceparent.and_then(propagate::trace_id_of);
        return RequestTrace {
            trace_id: trace_id.map_or_else(|| random.clone(), str::to_string),
            span_id: random[..16].to_string(),
            cx: None,
        };
    };
    let parent = propagate::extract(traceparent, header(propagate::TRACESTATE));
    let attrs = vec![
        KeyValue::new("http.request.method", req.method().to_string()),
        KeyValue::new("url.path", req.path().to_string()),
        KeyValue::new("url.scheme", req.connection_info().scheme().to_string()),
    ];
    let cx = server_span(tracing, &parent, req.method().as_str(), attrs);
    let (trace_id, span_id) = propagate::ids(&cx).unwrap_or_default();
    RequestTrace {
        trace_id,
        span_id,
        cx: Some(cx),
    }
}

fn server_span(tracing: &Tracing, parent: &Context, method: &str, attrs: Vec<KeyValue>) -> Context {
    tracing
        .start(parent, method.to_string(), SpanKind::Server, attrs)
        .expect("tracing is on")
}

/// Ends the server span with the matched route and the status.
pub fn finish(cx: Option<Context>, method: &str, route: &str, status: u16) {
    let Some(cx) = cx else {
        return;
    };
    let span = cx.span();
    span.update_name(format!("{method} {route}"));
    span.set_attribute(KeyValue::new("http.route", route.to_string()));
    span.set_attribute(KeyValue::new(
        "http.response.status_code",
        i64::from(status),
    ));
    if status >= 500 {
        span.set_status(Status::error(format!("HTTP {status}")));
    }
    span.end();
}

/// The reservation's own attributes on the current server span.
pub fn reservation(tracing: &Tracing, sku_id: SkuId, request_id: &RequestId, outcome: &str) {
    // The attributes are built only when tracing is on: this runs per request.
    if tracing.is_on() {
        outcome_on_request(ids(sku_id, request_id), outcome);
    }
}

/// An order's outcome on the request's span, named by the order id (an
/// order has no single SKU).
pub fn order(tracing: &Tracing, order_id: &RequestId, outcome: &str) {
    if tracing.is_on() {
        outcome_on_request([order_id_attr(order_id)], outcome);
    }
}

fn outcome_on_request(attrs: impl IntoIterator<Item = KeyValue>, outcome: &str) {
    let cx = Context::current();
    let span = cx.span();
    for attr in attrs {
        span.set_attribute(attr);
    }
    span.set_attribute(KeyValue::new("stockd.outcome", outcome.to_string()));
}

fn order_id_attr(order_id: &RequestId) -> KeyValue {
    KeyValue::new("stockd.request.id", order_id.to_string())
}

fn ids(sku_id: SkuId, request_id: &RequestId) -> [KeyValue; 2] {
    [
        KeyValue::new("stockd.sku.id", sku_id.get() as i64),
        KeyValue::new("stockd.request.id", request_id.to_string()),
    ]
}

/// The span of the reserve script (one EVALSHA).
pub fn redis_span(tracing: &Tracing, sku_id: SkuId, request_id: &RequestId) -> Option<Context> {
    let [sku, request] = ids(sku_id, request_id);
    let names = ("redis reserve.lua", "EVALSHA reserve.lua");
    script_span(tracing, names, vec![sku, request])
}

/// The span of an order's admission: one `order.lua` call on a standalone
/// Redis, the intent protocol's calls on a Redis Cluster or with a split SKU
/// line (`ops/order_saga.rs`).
pub fn order_redis_span(tracing: &Tracing, order_id: &RequestId, lines: usize) -> Option<Context> {
    let attrs = vec![
        order_id_attr(order_id),
        KeyValue::new("stockd.order.lines", lines as i64),
    ];
    script_span(tracing, ("redis order.lua", "EVALSHA order.lua"), attrs)
}

/// A span of Redis scripts: `(name, summary)` as constants, so nothing is
/// formatted on the hot path.
fn script_span(
    tracing: &Tracing,
    (name, summary): (&'static str, &'static str),
    ids: Vec<KeyValue>,
) -> Option<Context> {
    let mut attrs = vec![
        KeyValue::new("db.system", "redis"),
        KeyValue::new("db.operation.name", "EVALSHA"),
        KeyValue::new("db.query.summary", summary),
    ];
    attrs.extend(ids);
    tracing.child(name, SpanKind::Client, attrs)
}

/// The span of the deduction's publish (its share of a group-commit
/// message, up to the confirm), and the context the consumer continues from.
pub fn publish_span(
    tracing: &Tracing,
    exchange: &str,
    msg: &Deduction,
) -> (Option<Context>, Option<TraceContext>) {
    let [sku, request] = ids(msg.sku_id, &msg.request_id);
    let attrs = vec![
        KeyValue::new("messaging.system", "rabbitmq"),
        KeyValue::new("messaging.operation.type", "publish"),
        KeyValue::new("messaging.destination.name", exchange.to_string()),
        sku,
        request,
    ];
    let span = tracing.child(format!("publish {exchange}"), SpanKind::Producer, attrs);
    let carried =
        otel::sampled(&span)
            .and_then(propagate::inject)
            .map(|(traceparent, tracestate)| TraceContext {
                traceparent,
                tracestate,
            });
    (span, carried)
}
