//! The spans of the workers: the consumer's batch and its MySQL commit, each
//! deduction's commit in its request's trace, the lifecycle transitions
//! (closer expiry, confirm, cancel) and the reconciler's passes and repairs.
//!
//! Why a deduction gets a span of its own in the consumer: one batch carries
//! deductions of up to hundreds of traces, and a span has one parent. The
//! batch span is a child of its first traced deduction (a root when none is
//! traced) and links to every traced deduction;
//! each traced deduction gets a short `consumer commit` span parented on its
//! request's publish and linking back to the batch, so one trace holds the
//! whole path of one reservation, api to MySQL commit. Only sampled
//! deductions get one: at 1 % sampling, one span per hundred reservations.

use std::time::SystemTime;

use opentelemetry::trace::SpanKind;
use opentelemetry::{Context, KeyValue};

use crate::db::ledger::BatchReport;
use crate::domain::{Deduction, RequestId, SkuId};
use crate::mq::Delivery;
use crate::ops::lifecycle::{Transition, TransitionOutcome};
use crate::ops::reconcile::Report;
use crate::otel::{self, propagate, Tracing};

fn rabbitmq() -> KeyValue {
    KeyValue::new("messaging.system", "rabbitmq")
}

fn mysql() -> KeyValue {
    KeyValue::new("db.system", "mysql")
}

fn ids(sku_id: SkuId, request_id: &RequestId) -> [KeyValue; 2] {
    [
        KeyValue::new("stockd.sku.id", sku_id.get() as i64),
        KeyValue::new("stockd.request.id", request_id.to_string()),
    ]
}

/// The sampled trace context each deduction of a delivery carries.
pub fn contexts_of(delivery: &Delivery, n: usize) -> Vec<Option<Context>> {
    delivery
        .trace_contexts(n)
        .into_iter()
        .map(|carried| {
            let carried = carried?;
            let cx = propagate::extract(Some(&carried.traceparent), Some(&carried.tracestate));
            propagate::ids(&cx)?;
            Some(cx)
        })
        .collect()
}

/// One consumer batch in flight: its span, its MySQL commit span, and the
/// traced deductions (index into the batch, context).
pub struct BatchTrace {
    tracing: Tracing,
    queue: String,
    started: SystemTime,
    batch: Option<Context>,
    commit: Option<Context>,
    traced: Vec<(usize, Context)>,
}

impl BatchTrace {
    /// Opens the batch span (linked to every traced deduction) and its commit span.
    pub fn begin<'a>(
        tracing: &Tracing,
        queue: &str,
        deliveries: impl Iterator<Item = (&'a Delivery, usize)>,
        size: usize,
    ) -> Self {
        let mut traced = Vec::new();
        if tracing.is_on() {
            let mut at = 0;
            for (delivery, n) in deliveries {
                let found = contexts_of(delivery, n).into_iter().enumerate();
                traced.extend(found.filter_map(|(i, cx)| Some((at + i, cx?))));
                at += n;
            }
        }
        let links = traced
            .iter()
            .take(otel::LINKS_MAX)
            .filter_map(|(_, cx)| otel::link(cx));
        let attrs = vec![
            rabbitmq(),
            KeyValue::new("messaging.destination.name", queue.to_string()),
            KeyValue::new("messaging.operation.type", "process"),
            KeyValue::new("messaging.batch.message_count", size as i64),
        ];
        let name = format!("process {queue}");
        // A span has one parent: the first traced deduction's, so a batch
        // carrying a sampled deduction is recorded; the rest are links.
        let parent = traced
            .first()
            .map_or_else(Context::new, |(_, cx)| cx.clone());
        let batch = tracing.start_with(
            &parent,
            name,
            SpanKind::Consumer,
            attrs,
            links.collect(),
            None,
        );
        let commit = batch.as_ref().and_then(|cx| {
            let attrs = vec![
                mysql(),
                KeyValue::new("db.operation.name", "COMMIT"),
                KeyValue::new("db.query.summary", "apply batch"),
            ];
            tracing.start(cx, "mysql commit", SpanKind::Client, attrs)
        });
        Self {
            tracing: tracing.clone(),
            queue: queue.to_string(),
            started: SystemTime::now(),
            batch,
            commit,
            traced,
        }
    }

    /// Ends the spans: `report` when the batch committed, else the outcome.
    pub fn end(self, msgs: &[Deduction], report: Option<&BatchReport>, outcome: &str) {
        otel::end(self.commit, outcome, report.is_none());
        let back = self.batch.as_ref().and_then(otel::link);
        for (i, parent) in &self.traced {
            let Some(msg) = msgs.get(*i) else { continue };
            let [sku, request] = ids(msg.sku_id, &msg.request_id);
            let attrs = vec![
                rabbitmq(),
                KeyValue::new("messaging.destination.name", self.queue.clone()),
                mysql(),
                sku,
                request,
            ];
            let links = back.clone().into_iter().collect();
            let span = self.tracing.start_with(
                parent,
                "consumer commit",
                SpanKind::Consumer,
                attrs,
                links,
                Some(self.started),
            );
            otel::end(
                span,
                report.map_or(outcome, |r| outcome_of(msg, r)),
                report.is_none(),
            );
        }
        otel::end(self.batch, outcome, report.is_none());
    }
}

/// What MySQL made of one deduction of a committed batch.
fn outcome_of(msg: &Deduction, report: &BatchReport) -> &'static str {
    let same = |d: &Deduction| d.sku_id == msg.sku_id && d.request_id == msg.request_id;
    if report.rejected.iter().any(|(d, _)| same(d)) {
        return "rejected";
    }
    if report.foreign.iter().any(|(d, _)| same(d)) {
        return "foreign_duplicate";
    }
    "committed"
}

/// A lifecycle transition's span, under `parent` (the request, or the
/// expiry message's reservation trace).
pub fn transition_span(
    tracing: &Tracing,
    parent: &Context,
    transition: Transition,
    sku_id: SkuId,
    request_id: &RequestId,
) -> Option<Context> {
    transition_span_with(tracing, parent, transition, ids(sku_id, request_id).into())
}

/// A whole order's transition span, under the request: the order id in
/// `stockd.request.id`; no `stockd.sku.id`, an order has several.
pub fn order_transition_span(
    tracing: &Tracing,
    parent: &Context,
    transition: Transition,
    order_id: &RequestId,
) -> Option<Context> {
    let id = KeyValue::new("stockd.request.id", order_id.to_string());
    transition_span_with(tracing, parent, transition, vec![id])
}

fn transition_span_with(
    tracing: &Tracing,
    parent: &Context,
    transition: Transition,
    ids: Vec<KeyValue>,
) -> Option<Context> {
    let name = match transition {
        Transition::Confirm => "lifecycle confirm",
        Transition::Cancel => "lifecycle cancel",
        Transition::Expire => "lifecycle expire",
    };
    let mut attrs = vec![mysql(), KeyValue::new("db.operation.name", "UPDATE")];
    attrs.extend(ids);
    tracing.start(parent, name, SpanKind::Internal, attrs)
}

/// The `stockd.outcome` of a transition.
pub fn transition_outcome(outcome: &TransitionOutcome) -> &'static str {
    match outcome {
        TransitionOutcome::Done { changed: true, .. } => "changed",
        TransitionOutcome::Done { changed: false, .. } => "repeat",
        TransitionOutcome::Conflict { .. } => "conflict",
        TransitionOutcome::NotYetExpired => "not_yet_expired",
        TransitionOutcome::OrderLine => "order_line",
        TransitionOutcome::NotFound => "not_found",
    }
}

/// A reconciler pass, begun at `started`: one root span, and one child
/// span per SKU it repaired.
pub fn reconcile_pass(tracing: &Tracing, started: SystemTime, report: Result<&Report, &str>) {
    let attrs = vec![KeyValue::new(
        "stockd.reconcile.skus",
        report.map_or(0, |r| r.skus.len() as i64),
    )];
    let pass = tracing.start_with(
        &Context::new(),
        "reconcile pass",
        SpanKind::Internal,
        attrs,
        Vec::new(),
        Some(started),
    );
    let Some(cx) = &pass else { return };
    let outcome = match report {
        Ok(report) => {
            for sku in report.skus.iter().filter(|s| s.repaired) {
                let attrs = vec![
                    KeyValue::new("stockd.sku.id", sku.sku_id as i64),
                    KeyValue::new("stockd.reconcile.verdict", sku.verdict.as_str()),
                    KeyValue::new("stockd.reconcile.drift", sku.drift),
                ];
                let repair = tracing.start_with(
                    cx,
                    "reconcile repair",
                    SpanKind::Internal,
                    attrs,
                    Vec::new(),
                    Some(started),
                );
                otel::end(repair, "repaired", false);
            }
            if report.healthy() {
                "healthy"
            } else {
                "findings"
            }
        }
        Err(_) => "failed",
    };
    otel::end(pass, outcome, report.is_err());
}
