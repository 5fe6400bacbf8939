//! What `/metrics` exposes after a small run (a reservation through the whole
//! pipeline, the gauges refreshed) is what docs::metrics_source reads from
//! the source: every `stockd_*` series is a metric the source records, with labels
//! the source gives it, and has its runbook row. This keeps the source reader
//! honest (a metric it missed would go unchecked) and is the one docs check
//! that needs the services.

use std::collections::BTreeSet;

use crate::helpers::TestApp;

use super::metrics::{base_name, runbook_rows};
use super::metrics_source::recorded;

/// Labels the exporter adds itself: histogram buckets and summary quantiles.
const EXPORTER_LABELS: [&str; 2] = ["le", "quantile"];

/// (name, label names) of every sample line of a Prometheus exposition.
fn samples(text: &str) -> Vec<(String, BTreeSet<String>)> {
    text.lines()
        .filter(|l| l.starts_with("stockd_"))
        .map(|l| {
            let end = l.find(['{', ' ']).unwrap_or(l.len());
            let labels = match l[end..].strip_prefix('{') {
                Some(rest) => rest[..rest.find('}').unwrap_or(0)]
                    .split("\",")
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(k, _)| k.trim_start_matches(',').trim().to_string())
                    .filter(|k| !EXPORTER_LABELS.contains(&k.as_str()))
                    .collect(),
                None => BTreeSet::new(),
            };
            (l[..end].to_string(), labels)
        })
        .collect()
}

#[tokio::test]
async fn every_series_a_run_exposes_is_recorded_and_documented() {
    let app = TestApp::spawn_with_sku(1, 5, 5).await;
    app.reserve_ok(1, "docs-m1", 1, 1).await;
    app.wait_ledger_rows(1).await;
    stockd::roles::gauges::refresh(&app.res).await;
    let text = app.metrics_text().await;
    let recorded = recorded();
    let rows = runbook_rows();
    let mut bad = BTreeSet::new();
    let exposed = samples(&text);
    assert!(exposed.len() > 10, "too few series: {text}");
    for (name, labels) in exposed {
        let Some(base) = base_name(&name, &recorded) else {
            bad.insert(format!(
                "`{name}` is exposed but the source reader finds no such metric"
            ));
            continue;
        };
        let unread: Vec<_> = labels.difference(&recorded[&base]).collect();
        if !unread.is_empty() {
            bad.insert(format!(
                "`{base}`: labels {unread:?} exposed, not found in the source"
            ));
        }
        if !rows.contains_key(&base) {
            bad.insert(format!("`{base}` is exposed but has no runbook row"));
        }
    }
    app.finish_drained(1).await;
    assert!(
        bad.is_empty(),
        "{}",
        bad.into_iter().collect::<Vec<_>>().join("\n")
    );
}
