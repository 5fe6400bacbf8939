//! The export queue: finished spans go into a bounded channel and one task
//! sends them to the collector in batches. When the collector is slow or down
//! the channel fills and further spans are dropped and counted
//! (`stockd_trace_spans_dropped_total`): a span never waits, and so no answer
//! ever waits on the collector, and memory stays bounded by `queue_max`.
//!
//! Why not the SDK's `BatchSpanProcessor`: it runs the exporter on its own
//! thread with a blocking executor (the async HTTP client needs the tokio
//! runtime) and reports drops only in its internal log, not as a metric.

use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _, SpanProcessor};
use opentelemetry_sdk::Resource;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Most spans in one export request (the collector's default batch size).
const EXPORT_BATCH_MAX: usize = 512;
/// Pause between export requests while spans keep coming: bursts of a flash
/// sale leave in a few requests a second instead of one per span.
const EXPORT_INTERVAL: Duration = Duration::from_millis(200);

/// The collector's name in the outage log (one line when exports start
/// failing, one when they work again; never one per batch).
const COLLECTOR: &str = "otlp_collector";

/// The metric counting spans that never reached the collector, by reason.
pub const DROPPED_METRIC: &str = "stockd_trace_spans_dropped_total";

/// Hands finished, sampled spans to the export task, or drops them.
#[derive(Debug)]
pub struct BoundedExport {
    tx: mpsc::Sender<SpanData>,
}

impl SpanProcessor for BoundedExport {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.tx.try_send(span).is_err() {
            metrics::counter!(DROPPED_METRIC, "reason" => "queue_full").increment(1);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        // The export task stops on its own token (`Tracing::shutdown`).
        Ok(())
    }
}

/// Builds the OTLP/HTTP exporter for `url` and spawns its export task; the
/// processor feeds it. The task ends when `stop` fires, after one last export.
pub fn spawn(
    url: &str,
    resource: &Resource,
    queue_max: usize,
    timeout: Duration,
    stop: CancellationToken,
) -> anyhow::Result<(BoundedExport, tokio::task::JoinHandle<()>)> {
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(timeout)
        .build()
        .map_err(|err| anyhow::anyhow!("telemetry.otlp.endpoint: {err}"))?;
    exporter.set_resource(resource);
    let (tx, rx) = mpsc::channel(queue_max);
    let task = tokio::spawn(run(exporter, rx, timeout, stop));
    Ok((BoundedExport { tx }, task))
}

async fn run(
    exporter: opentelemetry_otlp::SpanExporter,
    mut rx: mpsc::Receiver<SpanData>,
    timeout: Duration,
    stop: CancellationToken,
) {
    loop {
        let mut batch = Vec::with_capacity(EXPORT_BATCH_MAX);
        let stopping = tokio::select! {
            n = rx.recv_many(&mut batch, EXPORT_BATCH_MAX) => n == 0,
            _ = stop.cancelled() => true,
        };
        if stopping {
            while batch.len() < EXPORT_BATCH_MAX {
                match rx.try_recv() {
                    Ok(span) => batch.push(span),
                    Err(_) => break,
                }
            }
        }
        send(&exporter, batch, timeout).await;
        if stopping {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(EXPORT_INTERVAL) => {}
            _ = stop.cancelled() => {}
        }
    }
}

/// One export request, bounded by `timeout`; its spans are counted as
/// exported or dropped.
async fn send(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: Vec<SpanData>,
    timeout: Duration,
) {
    if batch.is_empty() {
        return;
    }
    let n = batch.len() as u64;
    match tokio::time::timeout(timeout, exporter.export(batch)).await {
        Ok(Ok(())) => {
            crate::health::outage::answered(COLLECTOR);
            metrics::counter!("stockd_trace_spans_exported_total").increment(n);
        }
        Ok(Err(err)) => {
            crate::health::outage::failed(COLLECTOR, &err);
            metrics::counter!(DROPPED_METRIC, "reason" => "export_failed").increment(n);
        }
        Err(_) => {
            crate::health::outage::failed(
                COLLECTOR,
                &"no answer within telemetry.otlp.export_timeout_ms",
            );
            metrics::counter!(DROPPED_METRIC, "reason" => "export_timeout").increment(n);
        }
    }
}
