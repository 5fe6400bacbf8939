//! Distributed traces: the OpenTelemetry adapter. One [`Tracing`] handle per
//! process (built with the other resources) starts spans and exports them over
//! OTLP/HTTP to the collector of `telemetry.otlp.endpoint`.
//!
//! Why a handle and not the global tracer: every test app (and every role of
//! `--role all`) gets the provider of its own settings, and a process with
//! tracing off holds `None` — each call below returns at once, no span is
//! built, nothing is exported (issue 30: "off costs nothing measurable").
//!
//! - [`export`]: the bounded export queue that drops (and counts) instead of
//!   ever blocking an answer on a slow or dead collector;
//! - [`propagate`]: W3C `traceparent`/`tracestate` in and out.
//!
//! Spans are plain OpenTelemetry contexts (`Option<Context>`: `None` when off or
//! not sampled), so callers pass them on without knowing the SDK.

pub mod export;
pub mod propagate;

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Link, SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tokio_util::sync::CancellationToken;

use crate::config::OtlpSettings;

pub use opentelemetry::trace::SpanKind as Kind;
pub use opentelemetry::KeyValue as Attr;

/// The instrumentation scope named on every span.
const SCOPE: &str = "stockd";
/// How long shutdown waits for the last spans to reach the collector.
const SHUTDOWN_FLUSH: Duration = Duration::from_secs(2);
/// Most links one span carries (the SDK's default span limit): a consumer
/// batch of 500 deductions links to its first 128 sampled ones.
pub const LINKS_MAX: usize = 128;

/// Starts spans, or does nothing when tracing is off. Cheap to clone.
#[derive(Clone, Default)]
pub struct Tracing {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    stop: CancellationToken,
    exporting: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Tracing {
    /// Tracing off: every call is a no-op.
    pub fn off() -> Self {
        Self::default()
    }

    /// Built from `telemetry.otlp`: off without an endpoint, else a provider
    /// with a parent-based ratio sampler and the bounded export queue. Must
    /// run inside the tokio runtime (the export task is spawned on it).
    /// `instance` names this process (`service.instance.id`).
    pub fn from_settings(otlp: &OtlpSettings, instance: &str) -> anyhow::Result<Self> {
        let Some(url) = otlp.traces_url() else {
            return Ok(Self::off());
        };
        let timeout = Duration::from_millis(otlp.export_timeout_ms);
        let resource = Resource::builder()
            .with_service_name(SCOPE)
            .with_attribute(KeyValue::new("service.instance.id", instance.to_string()))
            .build();
        let stop = CancellationToken::new();
        let (processor, task) =
            export::spawn(&url, &resource, otlp.queue_max, timeout, stop.clone())?;
        let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(otlp.sample_ratio)));
        let provider = SdkTracerProvider::builder()
            .with_sampler(sampler)
            .with_span_processor(processor)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer(SCOPE);
        Ok(Self {
            inner: Some(Arc::new(Inner {
                provider,
                tracer,
                stop,
                exporting: Mutex::new(Some(task)),
            })),
        })
    }

    /// Whether spans are recorded at all (an endpoint is set).
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Starts a span under `parent` (a remote or local context); `None` when
    /// off. The span may still be unsampled: it then carries ids and no data.
    pub fn start(
        &self,
        parent: &Context,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attrs: Vec<KeyValue>,
    ) -> Option<Context> {
        self.start_with(parent, name, kind, attrs, Vec::new(), None)
    }

    /// [`Self::start`] with links and an explicit start time (a span opened
    /// for work that already began, as a deduction's commit in its batch).
    pub fn start_with(
        &self,
        parent: &Context,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attrs: Vec<KeyValue>,
        links: Vec<Link>,
        started: Option<SystemTime>,
    ) -> Option<Context> {
        let inner = self.inner.as_ref()?;
        let mut builder = inner
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attrs)
            .with_links(links);
        if let Some(started) = started {
            builder = builder.with_start_time(started);
        }
        let span = builder.start_with_context(&inner.tracer, parent);
        Some(parent.with_span(span))
    }

    /// Starts a child of the current context (the request's, while its
    /// handler runs under `with_context`).
    pub fn child(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attrs: Vec<KeyValue>,
    ) -> Option<Context> {
        if !self.is_on() {
            return None;
        }
        self.start(&Context::current(), name, kind, attrs)
    }

    /// Exports what is queued (up to [`SHUTDOWN_FLUSH`]) and stops the export
    /// task; last step of a process, after the roles stopped.
    pub async fn shutdown(&self) {
        let Some(inner) = &self.inner else {
            return;
        };
        inner.stop.cancel();
        let task = inner.exporting.lock().expect("export task lock").take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(SHUTDOWN_FLUSH, task).await;
        }
        let _ = inner.provider.shutdown();
    }
}

/// Adds attributes to a span (no-op for `None`).
pub fn set(span: &Option<Context>, attrs: impl IntoIterator<Item = KeyValue>) {
    if let Some(cx) = span {
        let span = cx.span();
        for attr in attrs {
            span.set_attribute(attr);
        }
    }
}

/// Ends a span with `stockd.outcome`; an error outcome also marks the span's status.
pub fn end(span: Option<Context>, outcome: &str, failed: bool) {
    if let Some(cx) = span {
        let span = cx.span();
        span.set_attribute(KeyValue::new("stockd.outcome", outcome.to_string()));
        if failed {
            span.set_status(Status::error(outcome.to_string()));
        }
        span.end();
    }
}

/// A link to another trace's span (a deduction's publish, from its batch).
pub fn link(cx: &Context) -> Option<Link> {
    let span_context = cx.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| Link::with_context(span_context))
}

/// The span context of `span`, when it is sampled (worth carrying on).
pub fn sampled(span: &Option<Context>) -> Option<&Context> {
    span.as_ref()
        .filter(|cx| cx.span().span_context().is_sampled())
}
