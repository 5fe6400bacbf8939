//! The metrics the docs name are the metrics the code records, with the labels
//! it records them with; and every metric the code records has a row in one of
//! docs/operations.md's `metric` tables (the runbook an operator reads).
//!
//! The code's metrics are read from the source: every `counter!`, `gauge!` and
//! `histogram!` of src/ (the load generator's src/bench only reads them), its
//! name a literal or a `&str` constant, its labels the `"label" =>` pairs. That
//! is the exposition `/metrics` gives after a run, without the run: a metric
//! appears there under the same name and labels once it is recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{all_tables, at, code_spans, markdown_files, prose_lines, read, root};

const RUNBOOK: &str = "docs/operations.md";
const MACROS: [&str; 3] = ["counter!(", "gauge!(", "histogram!("];
/// Series a histogram exposes beside its name.
const HISTOGRAM_SUFFIXES: [&str; 3] = ["_bucket", "_count", "_sum"];
/// Endings that make a `stockd_…` code span a metric (others are database
/// and user names: `stockd_app`, `stockd_t_…`).
const METRIC_ENDINGS: [&str; 7] = [
    "_total", "_seconds", "_size", "_units", "_sum", "_count", "_bucket",
];

/// Metric name → label names, from every metrics macro of src/.
pub(super) fn recorded() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    // A constant may have several values: `C::BATCH_SIZE_METRIC` is one per lane kind.
    let mut consts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for text in &files {
        for (ident, value) in str_consts(text) {
            consts.entry(ident).or_default().push(value);
        }
    }
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for text in &files {
        for (at, call) in macro_calls(text) {
            let first = call.split(',').next().unwrap().trim();
            let names = match first.strip_prefix('"') {
                Some(lit) => vec![lit.trim_end_matches('"').to_string()],
                None => consts
                    .get(first.rsplit("::").next().unwrap())
                    .cloned()
                    .unwrap_or_default(),
            };
            let labels = labels_of(&call, &text[..at]);
            for name in names.into_iter().filter(|n| n.starts_with("stockd_")) {
                out.entry(name).or_default().extend(labels.clone());
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && !path.ends_with("src/bench") {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// `const NAME: &str = "value";` (also `&'static str`) of one file.
fn str_consts(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let rest = l
                .trim_start()
                .trim_start_matches("pub ")
                .strip_prefix("const ")?;
            let (ident, rest) = rest.split_once(':')?;
            let value = rest.split_once("= \"")?.1.split('"').next()?;
            Some((ident.trim().to_string(), value.to_string()))
        })
        .collect()
}

/// Where every metrics macro call starts, and its argument text (up to its
/// closing paren).
fn macro_calls(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for mac in MACROS {
        for (i, _) in text.match_indices(mac) {
            let args = &text[i + mac.len()..];
            let mut depth = 1;
            let end = args
                .char_indices()
                .find(|(_, c)| {
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map(|(j, _)| j)
                .unwrap_or(args.len());
            out.push((i, args[..end].to_string()));
        }
    }
    out
}

/// The label names of one call: every `"name" =>`, or, for labels passed as
/// a variable (`&labels`), every `("name",` of its `let labels = [...]`
/// before the call.
fn labels_of(call: &str, before_call: &str) -> Vec<String> {
    let pairs: Vec<String> = call
        .match_indices("=>")
        .filter_map(|(i, _)| {
            let before = call[..i].trim_end().strip_suffix('"')?;
            Some(before[before.rfind('"')? + 1..].to_string())
        })
        .collect();
    let Some(var) = call
        .split(',')
        .nth(1)
        .map(|a| a.trim().trim_start_matches('&'))
    else {
        return pairs;
    };
    if !pairs.is_empty() || !var.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        return pairs;
    }
    let Some(start) = before_call.rfind(&format!("let {var} = [")) else {
        return pairs;
    };
    let list = &before_call[start..];
    let list = &list[..list.find("];").unwrap_or(list.len())];
    list.match_indices("(\"")
        .filter_map(|(i, _)| list[i + 2..].split('"').next().map(str::to_string))
        .collect()
}

/// `name{a="x",b}` → (name, [a, b]).
fn parse_mention(span: &str) -> (String, Vec<String>) {
    let (name, labels) = match span.split_once('{') {
        Some((n, l)) => (n, l.trim_end_matches('}')),
        None => (span, ""),
    };
    let labels = labels
        .split(',')
        .map(|l| l.split('=').next().unwrap().trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    (name.to_string(), labels)
}

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
                let (name, labels) = parse_mention(span);
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
                let (name, labels) = parse_mention(&span);
                rows.entry(name).or_default().extend(labels);
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
