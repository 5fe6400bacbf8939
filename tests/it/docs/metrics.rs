//! The metrics the docs name are the metrics the code records, with the labels
//! it records them with; and every metric the code records has a row in one of
//! docs/operations.md's `metric` tables (the runbook an operator reads).
//!
//! The code's metrics are read from the source (docs::metrics_source); the
//! label values the docs give are docs::metric_labels' part.

use std::collections::{BTreeMap, BTreeSet};

use super::metrics_source::{mention, recorded};
use super::{all_tables, at, code_spans, markdown_files, prose_lines, read};

pub(super) const RUNBOOK: &str = "docs/operations.md";
/// Series a histogram exposes beside its name.
const HISTOGRAM_SUFFIXES: [&str; 3] = ["_bucket", "_count", "_sum"];
/// Endings that make a `stockd_…` code span a metric (others are database
/// and user names: `stockd_app`, `stockd_t_…`).
pub(super) const METRIC_ENDINGS: [&str; 7] = [
    "_total", "_seconds", "_size", "_units", "_sum", "_count", "_bucket",
];

/// The recorded metric a documented name is a series of.
pub(super) fn base_name(
    name: &str,
    recorded: &BTreeMap<String, BTreeSet<String>>,
) -> Option<String> {
    if recorded.contains_key(name) {
        return Some(name.to_string());
    }
    HISTOGRAM_SUFFIXES
        .iter()
        .filter_map(|s| name.strip_suffix(s))
        .find(|n| recorded.contains_key(*n))
        .map(str::to_string)
}

#[test]
fn every_documented_metric_and_label_is_recorded() {
    let recorded = recorded();
    let mut bad = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        for (n, line) in prose_lines(&text).iter().enumerate() {
            for span in code_spans(line).iter().filter(|s| s.starts_with("stockd_")) {
                let (name, labels) = mention(span);
                let labels: Vec<String> = labels.into_iter().map(|(l, _)| l).collect();
                let is_metric =
                    span.contains('{') || METRIC_ENDINGS.iter().any(|e| name.ends_with(e));
                if !is_metric {
                    continue;
                }
                let Some(base) = base_name(&name, &recorded) else {
                    bad.push(format!(
                        "{}: `{name}` is recorded nowhere in src/",
                        at(&file, n + 1)
                    ));
                    continue;
                };
                for label in labels.iter().filter(|l| !recorded[&base].contains(*l)) {
                    bad.push(format!(
                        "{}: `{base}` has no label `{label}` (it has {:?})",
                        at(&file, n + 1),
                        recorded[&base]
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Metric → the labels its rows name, from the `metric` tables of the runbook.
pub(super) fn runbook_rows() -> BTreeMap<String, BTreeSet<String>> {
    let mut rows: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, table) in all_tables() {
        if file != RUNBOOK || !table.first_header_is("metric") {
            continue;
        }
        for (_, row) in &table.rows {
            for span in code_spans(&row[0]) {
                let (name, labels) = mention(&span);
                rows.entry(name)
                    .or_default()
                    .extend(labels.into_iter().map(|(l, _)| l));
            }
        }
    }
    rows
}

#[test]
fn every_recorded_metric_has_a_runbook_row_naming_its_labels() {
    let recorded = recorded();
    let rows = runbook_rows();
    let mut bad = Vec::new();
    for (name, labels) in &recorded {
        match rows.get(name) {
            None => bad.push(format!(
                "`{name}` (labels {labels:?}) has no row in a `metric` table of {RUNBOOK}"
            )),
            Some(documented) => {
                let missing: Vec<_> = labels.difference(documented).collect();
                if !missing.is_empty() {
                    bad.push(format!("`{name}`: its row names no label {missing:?}"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
