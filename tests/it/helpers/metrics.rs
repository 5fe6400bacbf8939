//! Reading the test app's `/metrics` (Prometheus text): one parser for the
//! tests that count a series before and after what they do.

use std::collections::BTreeMap;

use super::TestApp;

/// Every series of metric `name` in Prometheus `text`: its label set (`""`
/// when it has none, else `{…}`) and its value.
pub fn series_of(text: &str, name: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter(|l| l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series[name.len()..].to_string(), value.parse::<f64>().ok()?))
        })
        .collect()
}

impl TestApp {
    /// The sum of the values of every `/metrics` line that starts with
    /// `series` (a name, or a name and its first labels).
    pub async fn metric_sum(&self, series: &str) -> f64 {
        self.metrics_text()
            .await
            .lines()
            .filter(|l| l.starts_with(series))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}
