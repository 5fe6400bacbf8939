//! Logs (tracing) and metrics (Prometheus exporter), set up once per process,
//! and the metrics listener of roles without the HTTP API. Process plumbing:
//! it reads no store (the polled gauges are `roles::gauges`).

pub mod kept_counter;
pub mod metrics_listener;

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, LoggingSettings};

/// Latency buckets (seconds): the hot path is sub-millisecond, persist lag is
/// tens to hundreds of milliseconds, a stuck pipeline is seconds.
const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Batch size buckets of the consumer.
const BATCH_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0];
/// How often histograms are compacted (the exporter's upkeep).
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

static METRICS: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the global metrics recorder once; later calls return the same handle
/// (tests build many apps in one process).
pub fn metrics_handle() -> PrometheusHandle {
    METRICS
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS_SECONDS)
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Suffix("_batch_size".into()),
                        BATCH_SIZE_BUCKETS,
                    )
                })
                .expect("bucket lists are non-empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may exist in tests; then metrics go to that one.
            let _ = metrics::set_global_recorder(recorder);
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(UPKEEP_INTERVAL);
                    upkeep.run_upkeep();
                })
                .expect("spawning the metrics upkeep thread");
            handle
        })
        .clone()
}

/// Whether [`metrics_handle`] has installed the process's recorder: a metric
/// handle taken before it counts nowhere (`roles/api/request_series.rs`
/// keeps handles only after).
pub fn recorder_installed() -> bool {
    METRICS.get().is_some()
}

/// Initializes logging. `RUST_LOG` overrides `logging.level`.
pub fn init_logging(settings: &LoggingSettings) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(settings.level.clone()));
    // Colours only on a terminal: a journal or a log file gets plain text
    // (and every request's span skips formatting escape codes).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match settings.format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}
