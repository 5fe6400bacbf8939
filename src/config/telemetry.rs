//! The `metrics` and `logging` sections: what the process tells its operators
//! and where. Nothing here needs a check serde cannot do.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {
    /// Listener for `/metrics` and `/livez` of roles without the HTTP API.
    pub bind: String,
    /// Seconds between refreshes of dependency, queue and stock gauges.
    pub refresh_secs: u64,
    /// SKUs whose available stock is exported with a `sku` label (bounded on
    /// purpose: per-SKU labels for every SKU would explode the series count).
    pub sku_allowlist: Vec<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoggingSettings {
    pub format: LogFormat,
    pub level: String,
}

/// The `telemetry` section: distributed traces (docs/operations.md, "Tracing").
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetrySettings {
    pub otlp: OtlpSettings,
}

/// OTLP export of traces. With no `endpoint` nothing is recorded or exported.
/// `Debug` is written in `redact.rs`: the endpoint's userinfo and query never show.
#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpSettings {
    /// The collector's OTLP/HTTP base URL (`http://host:4318`); spans are
    /// POSTed to `<endpoint>/v1/traces`. `None`: tracing is off.
    pub endpoint: Option<String>,
    /// Share of new traces sampled (0..=1); a caller's sampled flag wins.
    pub sample_ratio: f64,
    /// Finished spans waiting for export; past it spans are dropped and counted.
    pub queue_max: usize,
    /// Longest wait for one export request before its spans are dropped.
    pub export_timeout_ms: u64,
}

/// Most spans the export queue may be set to hold (~1 KiB each).
const QUEUE_MAX_LIMIT: usize = 1_000_000;
/// Longest export timeout accepted: a minute is already a dead collector.
const EXPORT_TIMEOUT_MS_LIMIT: u64 = 60_000;

impl OtlpSettings {
    pub fn validate(&self) -> anyhow::Result<()> {
        super::check::all(&[
            (
                (0.0..=1.0).contains(&self.sample_ratio),
                "telemetry.otlp.sample_ratio",
                "must be between 0 and 1",
            ),
            (
                (1..=QUEUE_MAX_LIMIT).contains(&self.queue_max),
                "telemetry.otlp.queue_max",
                "must be between 1 and 1000000",
            ),
            (
                (1..=EXPORT_TIMEOUT_MS_LIMIT).contains(&self.export_timeout_ms),
                "telemetry.otlp.export_timeout_ms",
                "must be between 1 and 60000",
            ),
        ])?;
        if let Some(url) = &self.endpoint {
            let host = url.strip_prefix("http://").unwrap_or_default();
            if host.is_empty() || host.contains(char::is_whitespace) {
                anyhow::bail!(
                    "invalid configuration key `telemetry.otlp.endpoint`: must be an http:// URL (OTLP/HTTP, e.g. http://127.0.0.1:4318)"
                );
            }
        }
        Ok(())
    }

    /// Where spans are POSTed: the endpoint with the OTLP traces path.
    pub fn traces_url(&self) -> Option<String> {
        let base = self.endpoint.as_deref()?.trim_end_matches('/');
        if base.ends_with("/v1/traces") {
            return Some(base.to_string());
        }
        Some(format!("{base}/v1/traces"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn otlp(endpoint: Option<&str>, sample_ratio: f64) -> OtlpSettings {
        OtlpSettings {
            endpoint: endpoint.map(str::to_string),
            sample_ratio,
            queue_max: 2048,
            export_timeout_ms: 1000,
        }
    }

    #[test]
    fn otlp_settings_name_the_bad_key() {
        assert!(otlp(None, 0.01).validate().is_ok());
        assert!(otlp(Some("http://127.0.0.1:4318"), 1.0).validate().is_ok());
        let err = otlp(None, 1.5).validate().unwrap_err().to_string();
        assert!(err.contains("telemetry.otlp.sample_ratio"), "{err}");
        let err = otlp(Some("https://x:4318"), 0.1)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(err.contains("telemetry.otlp.endpoint"), "{err}");
        let base = otlp(Some("http://c:4318/"), 0.1);
        assert_eq!(
            base.traces_url().as_deref(),
            Some("http://c:4318/v1/traces")
        );
        assert_eq!(otlp(None, 0.1).traces_url(), None);
    }
}
