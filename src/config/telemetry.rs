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
