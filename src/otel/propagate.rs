//! W3C trace context (`traceparent`, `tracestate`) read from and written to
//! plain strings: the HTTP request's headers, a deduction's AMQP headers. The
//! parsing is the SDK's `TraceContextPropagator`; only the carriers are ours.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

struct Pair<'a> {
    traceparent: Option<&'a str>,
    tracestate: Option<&'a str>,
}

impl Extractor for Pair<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => self.traceparent,
            TRACESTATE => self.tracestate,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

/// The remote context a caller sent (an empty context when `traceparent` is
/// missing or malformed: a new trace starts, as W3C requires).
pub fn extract(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    let pair = Pair {
        traceparent,
        tracestate,
    };
    TraceContextPropagator::new().extract(&pair)
}

struct Map(HashMap<String, String>);

impl Injector for Map {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), value);
    }
}

/// `(traceparent, tracestate)` of the span in `cx`, when it is valid.
pub fn inject(cx: &Context) -> Option<(String, String)> {
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut map = Map(HashMap::with_capacity(2));
    TraceContextPropagator::new().inject_context(cx, &mut map);
    let traceparent = map.0.remove(TRACEPARENT)?;
    Some((traceparent, map.0.remove(TRACESTATE).unwrap_or_default()))
}

/// The trace id and span id (lower-case hex) of the span in `cx`, if valid.
pub fn ids(cx: &Context) -> Option<(String, String)> {
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid()
        .then(|| (sc.trace_id().to_string(), sc.span_id().to_string()))
}

/// The trace id a caller's `traceparent` names, without building a context
/// (tracing off: the id is still answered and logged).
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    let mut parts = traceparent.split('-');
    let (version, trace_id) = (parts.next()?, parts.next()?);
    let valid = version.len() == 2
        && version != "ff"
        && trace_id.len() == 32
        && trace_id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && trace_id.bytes().any(|b| b != b'0');
    valid.then_some(trace_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips_and_garbage_starts_a_new_trace() {
        let cx = extract(Some(PARENT), Some("vendor=x"));
        let (trace_id, span_id) = ids(&cx).unwrap();
        assert_eq!(trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(span_id, "00f067aa0ba902b7");
        assert_eq!(
            inject(&cx).unwrap(),
            (PARENT.to_string(), "vendor=x".to_string())
        );
        assert!(ids(&extract(Some("00-zz-00f067aa0ba902b7-01"), None)).is_none());
        assert!(ids(&extract(None, None)).is_none());
        assert_eq!(
            trace_id_of(PARENT),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(trace_id_of(bad), None, "{bad}");
        }
    }
}
