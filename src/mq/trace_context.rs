//! Each deduction's W3C trace context, carried in the AMQP headers of the
//! message that holds it — never in the body, so a consumer that predates
//! tracing (whose deduction parser refuses unknown fields) reads a traced
//! message as before, and a traced consumer reads an old message as untraced:
//! a rolling upgrade works both ways.
//!
//! `x-stockd-trace` is an array with one table per deduction of the body, in
//! body order: `{traceparent, tracestate}`, or empty for a deduction without a
//! sampled context. A message with no traced deduction has no header at all
//! (1 % sampling adds nothing to 99 % of the messages). A one-deduction message
//! also carries the standard `traceparent`/`tracestate` headers, which any AMQP
//! instrumentation understands.

use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};

/// The header holding every deduction's context.
pub const TRACE_HEADER: &str = "x-stockd-trace";
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// One deduction's context, as the W3C headers spell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: String,
    /// Empty when the caller sent none.
    pub tracestate: String,
}

/// Adds the contexts of a message's deductions (`contexts[i]` is deduction
/// i's) to `headers`; adds nothing when none is set.
pub fn write(headers: &mut FieldTable, contexts: &[Option<TraceContext>]) {
    if contexts.iter().all(Option::is_none) {
        return;
    }
    let mut array = FieldArray::default();
    for context in contexts {
        let mut table = FieldTable::default();
        if let Some(context) = context {
            insert(&mut table, context);
        }
        array.push(AMQPValue::FieldTable(table));
    }
    headers.insert(TRACE_HEADER.into(), AMQPValue::FieldArray(array));
    if let [Some(only)] = contexts {
        insert(headers, only);
    }
}

fn insert(table: &mut FieldTable, context: &TraceContext) {
    let text = |s: &str| AMQPValue::LongString(LongString::from(s));
    table.insert(TRACEPARENT.into(), text(&context.traceparent));
    if !context.tracestate.is_empty() {
        table.insert(TRACESTATE.into(), text(&context.tracestate));
    }
}

/// The contexts of a message carrying `n` deductions, one per deduction
/// (`None` where it has none); all `None` for a message without the header or
/// with one that does not match the body (never a reason to refuse a message).
pub fn read(headers: Option<&FieldTable>, n: usize) -> Vec<Option<TraceContext>> {
    let array = headers.and_then(|h| match h.inner().get(TRACE_HEADER) {
        Some(AMQPValue::FieldArray(array)) if array.as_slice().len() == n => Some(array),
        _ => None,
    });
    let Some(array) = array else {
        return vec![None; n];
    };
    array
        .as_slice()
        .iter()
        .map(|value| match value {
            AMQPValue::FieldTable(table) => context_of(table),
            _ => None,
        })
        .collect()
}

fn context_of(table: &FieldTable) -> Option<TraceContext> {
    let text = |key: &str| match table.inner().get(key) {
        Some(AMQPValue::LongString(s)) => Some(s.to_string()),
        _ => None,
    };
    Some(TraceContext {
        traceparent: text(TRACEPARENT)?,
        tracestate: text(TRACESTATE).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(n: u8) -> TraceContext {
        TraceContext {
            traceparent: format!("00-{:032x}-00f067aa0ba902b7-01", n),
            tracestate: if n == 1 { "k=v".into() } else { String::new() },
        }
    }

    #[test]
    fn contexts_travel_by_position_and_a_mismatch_reads_as_untraced() {
        let mut headers = FieldTable::default();
        write(&mut headers, &[None, None]);
        assert!(headers.inner().is_empty(), "nothing traced, nothing added");
        let contexts = vec![Some(context(1)), None, Some(context(3))];
        write(&mut headers, &contexts);
        assert_eq!(read(Some(&headers), 3), contexts);
        assert_eq!(read(Some(&headers), 2), vec![None, None]);
        assert_eq!(read(None, 1), vec![None]);
        let mut single = FieldTable::default();
        write(&mut single, &[Some(context(1))]);
        assert!(single.contains_key(TRACEPARENT) && single.contains_key(TRACESTATE));
        assert_eq!(read(Some(&single), 1), vec![Some(context(1))]);
    }
}
