//! The label values the docs give for a metric are values the code records it
//! with: an operator pastes `stockd_consumer_messages_total{outcome="rejected"}`
//! into a query, and a value the code never records matches nothing, silently.
//! docs::metrics checks the metric and label names; this file the values.
//!
//! The docs give values in two shapes:
//! - a span `name{label="value"}` (or `{label="a"|"b"}`), anywhere;
//! - a row of a `metric` table of docs/operations.md: each one-word span of
//!   its description (`leased`, `ahead`, …) is a value of one of the row's
//!   labels, or a label's name (`reason` `EXPIRED`), and `label="value"` spans
//!   the value of that label.
//!
//! The code's values: a literal at the call (`"outcome" => "rejected"`), or,
//! for a value passed as a variable, the places [`VARIABLE`] names (read from
//! the source, so they follow the code), or no check at all for labels whose
//! values are open-ended (a route, a SKU id). A variable label missing from
//! [`VARIABLE`] fails the test: a new one is resolved or skipped by decision.

use std::collections::{BTreeMap, BTreeSet};

use super::metrics::RUNBOOK;
use super::metrics_source::{calls, mention, recorded, str_consts};
use super::{all_tables, at, code_spans, paragraph_spans, prose_sources, read, source_files};

/// Where a label's values are written when the call passes a variable.
enum Values {
    /// Every string literal of these blocks: (file, text the block starts
    /// with). A block opening `fn` or `enum` is its braces; another (a `let`)
    /// runs to its `;`. May take in a literal that is no value (a log
    /// message): harmless, the docs do not give those as values.
    Literals(&'static [(&'static str, &'static str)]),
    /// The literal (or `&str` constant) first argument of every call `f(` in
    /// the file, beside `Literals`.
    Args(
        &'static str,
        &'static str,
        &'static [(&'static str, &'static str)],
    ),
    /// The unit variants of an enum, lowercased (a `{:?}` of the variant).
    Variants(&'static str, &'static str),
    /// Not checked, and why.
    Open(&'static str),
}

/// Every (metric, label) whose value some call passes as a variable.
const VARIABLE: &[(&str, &str, Values)] = &[
    ("stockd_consumer_messages_total", "outcome", Values::Literals(&[("src/roles/consumer.rs", "let (exchange, key, outcome) =")])),
    ("stockd_publish_total", "outcome", Values::Literals(&[("src/mq/publisher.rs", "let outcome = match &result"), ("src/mq/publisher.rs", "pub fn label(&self)")])),
    ("stockd_bucket_refills_total", "result", Values::Literals(&[("src/redis/buckets/refill.rs", "let label = match outcome")])),
    ("stockd_bucket_round_trips_total", "step", Values::Args("src/redis", "count_round_trip(", &[])),
    // A refusal by a SKU's sale terms is counted by `GateRefusal::label`.
    ("stockd_reservations_total", "result", Values::Literals(&[("src/roles/api/routes/holds/mod.rs", "async fn refusal("), ("src/domain/outcome.rs", "pub fn label(&self)"), ("src/domain/sale.rs", "pub fn label(&self)"),
                ("src/roles/api/routes/holds/reservation.rs", "async fn claim_budget(")])),
    ("stockd_orders_total", "result", Values::Literals(&[("src/roles/api/routes/holds/order.rs", "let (label, response) = match"), ("src/roles/api/routes/holds/order.rs", "async fn answer("),
                ("src/roles/api/routes/holds/mod.rs", "async fn refusal("), ("src/roles/api/routes/lifecycle.rs", "let label = match transition"), ("src/domain/sale.rs", "pub fn label(&self)")])),
    ("stockd_order_sweep_failures_total", "stage", Values::Args("src/ops/order_sweeper.rs", "failed(", &[("src/ops/order_sweep_error.rs", "fn stage(&self)")])),
    ("stockd_reconcile_verdicts_total", "verdict", Values::Literals(&[("src/ops/reconcile/verdict.rs", "pub fn as_str(self)")])),
    // `Finding::verdict` is a `Verdict::as_str`.
    ("stockd_reconcile_alerts_total", "verdict", Values::Literals(&[("src/ops/reconcile/verdict.rs", "pub fn as_str(self)")])),
    ("stockd_breaker_open", "dependency", Values::Args("src", "Breaker::new(", &[])),
    ("stockd_breaker_trips_total", "dependency", Values::Args("src", "Breaker::new(", &[])),
    ("stockd_dependency_failures_total", "dependency", Values::Open("passed on by callers that take it from an error (an api problem, a start-up wait), not written at one place")),
    ("stockd_consumer_readmissions_total", "outcome", Values::Variants("src/redis/readmit.rs", "pub enum ReadmitOutcome")),
    ("stockd_client_auth_refused_total", "reason", Values::Literals(&[("src/roles/api/auth/trail.rs", "fn as_str(self)")])),
    ("stockd_rate_limited_total", "kind", Values::Args("src", "rate_limited(", &[])),
    // Every event type: `events::EventType::as_str` is the routing key.
    ("stockd_events_published_total", "type", Values::Literals(&[("src/events/mod.rs", "pub fn as_str(self)")])),
    ("stockd_http_requests_total", "route", Values::Open("every route pattern of the API")),
    ("stockd_http_requests_total", "status", Values::Open("every HTTP status")),
    ("stockd_http_requests_total", "client", Values::Open("the configured client names")),
    ("stockd_http_request_duration_seconds", "route", Values::Open("every route pattern of the API")),
    ("stockd_http_request_duration_seconds", "client", Values::Open("the configured client names")),
    ("stockd_queue_messages", "queue", Values::Open("queue names under the configured prefix")),
    ("stockd_reconcile_drift_units", "sku", Values::Open("SKU ids")),
    ("stockd_sku_available", "sku", Values::Open("SKU ids")),
    ("stockd_sku_pool", "sku", Values::Open("SKU ids")),
    ("stockd_sku_bucket_available", "sku", Values::Open("SKU ids; `bucket` too")),
    ("stockd_sku_bucket_drained", "sku", Values::Open("SKU ids; `bucket` too")),
];
/// Labels of the `&labels` array whose values are variables, beside `sku`.
const OPEN_TOO: [(&str, &str); 2] = [
    ("stockd_sku_bucket_available", "bucket"),
    ("stockd_sku_bucket_drained", "bucket"),
];

/// The string literals of `text`.
fn literals(text: &str) -> Vec<String> {
    text.split('"')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

/// The block of `file` that starts with `start` (see [`Values::Literals`]).
fn block(file: &str, start: &str) -> String {
    let text = read(file);
    let i = text
        .find(start)
        .unwrap_or_else(|| panic!("{file} has no `{start}`: update docs::metric_labels' VARIABLE"));
    let rest = &text[i..];
    let braces = start.contains("fn ") || start.contains("enum ");
    let mut depth = 0;
    let mut opened = false;
    for (j, c) in rest.char_indices() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                opened |= c == '{';
            }
            ')' | ']' | '}' => depth -= 1,
            ';' if depth == 0 && !braces => return rest[..j].to_string(),
            _ => {}
        }
        if braces && opened && depth == 0 {
            return rest[..=j].to_string();
        }
    }
    rest.to_string()
}

fn resolve(values: &Values) -> Option<BTreeSet<String>> {
    let from_blocks = |blocks: &[(&str, &str)]| -> BTreeSet<String> {
        blocks
            .iter()
            .flat_map(|(f, s)| literals(&block(f, s)))
            .collect()
    };
    match values {
        Values::Literals(blocks) => Some(from_blocks(blocks)),
        Values::Args(dir, call, blocks) => {
            let mut out = from_blocks(blocks);
            let files: Vec<(String, String)> = if dir.ends_with(".rs") {
                vec![(dir.to_string(), read(dir))]
            } else {
                source_files(dir)
            };
            let consts: BTreeMap<String, String> =
                files.iter().flat_map(|(_, t)| str_consts(t)).collect();
            for (_, text) in &files {
                for (i, _) in text.match_indices(call) {
                    if text[..i].ends_with("fn ") {
                        continue;
                    }
                    let arg = text[i + call.len()..].trim_start();
                    if let Some(lit) = arg.strip_prefix('"') {
                        out.insert(lit.split('"').next().unwrap().to_string());
                    } else {
                        let ident = arg
                            .split(|c: char| !c.is_alphanumeric() && c != '_')
                            .next()
                            .unwrap();
                        out.extend(consts.get(ident).cloned());
                    }
                }
            }
            Some(out)
        }
        Values::Variants(file, start) => {
            let body = block(file, start);
            let body = &body[body.find('{').unwrap() + 1..body.rfind('}').unwrap()];
            Some(
                body.lines()
                    .map(str::trim)
                    .filter(|l| !l.starts_with("//") && !l.is_empty())
                    .map(|l| l.trim_end_matches(',').to_lowercase())
                    .collect(),
            )
        }
        Values::Open(_) => None,
    }
}

/// (metric, label) → the values the code records it with; `None`: not checked.
type Recorded = BTreeMap<(String, String), Option<BTreeSet<String>>>;

fn recorded_values() -> Recorded {
    let variable: BTreeMap<(&str, &str), &Values> =
        VARIABLE.iter().map(|(m, l, v)| ((*m, *l), v)).collect();
    let mut out: Recorded = BTreeMap::new();
    let mut unlisted = BTreeSet::new();
    let mut passed_as_variable = BTreeSet::new();
    for call in calls() {
        for name in &call.names {
            for (label, expr) in &call.labels {
                let key = (name.clone(), label.clone());
                let entry = out.entry(key).or_insert_with(|| Some(BTreeSet::new()));
                let literal = expr.strip_prefix('"').and_then(|e| e.strip_suffix('"'));
                if let Some(value) = literal.filter(|v| !v.contains('"')) {
                    if let Some(set) = entry {
                        set.insert(value.to_string());
                    }
                    continue;
                }
                passed_as_variable.insert((name.clone(), label.clone()));
                if OPEN_TOO.contains(&(name.as_str(), label.as_str())) {
                    *entry = None;
                    continue;
                }
                match variable.get(&(name.as_str(), label.as_str())) {
                    None => {
                        unlisted.insert(format!("{}: `{name}` label `{label}` => {expr}", call.at));
                    }
                    Some(values) => match (resolve(values), entry.as_mut()) {
                        (Some(found), Some(set)) => set.extend(found),
                        _ => *entry = None,
                    },
                }
            }
        }
    }
    let unexplained: Vec<_> = VARIABLE
        .iter()
        .filter(|(_, _, v)| matches!(v, Values::Open(why) if why.trim().is_empty()))
        .map(|(m, l, _)| format!("{m}/{l}"))
        .collect();
    assert!(
        unexplained.is_empty(),
        "skipped without a why: {unexplained:?}"
    );
    let stale: Vec<_> = VARIABLE
        .iter()
        .filter(|(m, l, _)| !passed_as_variable.contains(&(m.to_string(), l.to_string())))
        .map(|(m, l, _)| format!("{m}/{l}"))
        .collect();
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "label values passed as a variable: list each in docs::metric_labels' VARIABLE (where its values are written, or Open and why):\n{}\nlisted, but no call passes a variable: {stale:?}",
        unlisted.into_iter().collect::<Vec<_>>().join("\n")
    );
    out
}

/// A failure for `value` of `metric`'s `label`, if the code does not record it.
fn check(recorded: &Recorded, metric: &str, label: &str, value: &str) -> Option<String> {
    let Some(Some(values)) = recorded.get(&(metric.to_string(), label.to_string())) else {
        return None;
    };
    (!values.contains(value)).then(|| {
        format!("`{metric}{{{label}=\"{value}\"}}`, but the code records {label} as {values:?}")
    })
}

#[test]
fn every_label_value_the_docs_give_is_recorded() {
    let recorded = recorded_values();
    let mut bad = Vec::new();
    let mut given = 0;
    for (file, text) in prose_sources() {
        for super::Span {
            line, text: span, ..
        } in paragraph_spans(&text)
        {
            if !span.starts_with("stockd_") || !span.contains('=') {
                continue;
            }
            let (metric, labels) = mention(&span);
            for (label, values) in labels {
                for value in values {
                    given += 1;
                    if let Some(why) = check(&recorded, &metric, &label, &value) {
                        bad.push(format!("{}: {why}", at(&file, line)));
                    }
                }
            }
        }
    }
    assert!(
        given > 10,
        "only {given} label values found: is the reader broken?"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_label_value_a_runbook_row_lists_is_recorded() {
    let names = recorded();
    let recorded = recorded_values();
    let mut bad = Vec::new();
    let mut given = 0;
    for (file, table) in all_tables() {
        if file != RUNBOOK || !table.first_header_is("metric") {
            continue;
        }
        for (line, row) in &table.rows {
            // The row's (metric, label) pairs and their values.
            let pairs: Vec<(String, String)> = code_spans(&row[0])
                .iter()
                .map(|s| mention(s).0)
                .filter_map(|m| Some((m.clone(), names.get(&m)?.clone())))
                .flat_map(|(m, labels)| labels.into_iter().map(move |l| (m.clone(), l)))
                .collect();
            if pairs.is_empty() {
                continue;
            }
            let label_names: BTreeSet<&str> = pairs.iter().map(|(_, l)| l.as_str()).collect();
            let all_checked = pairs
                .iter()
                .all(|p| matches!(recorded.get(p), Some(Some(_))));
            for span in row[1..].iter().flat_map(|c| code_spans(c)) {
                if let Some((label, value)) = span.split_once('=') {
                    let value = value.trim_matches('"');
                    for (metric, _) in pairs.iter().filter(|(_, l)| l == label) {
                        given += 1;
                        if let Some(why) = check(&recorded, metric, label, value) {
                            bad.push(format!("{}: {why}", at(&file, *line)));
                        }
                    }
                    continue;
                }
                let is_word =
                    !span.is_empty() && span.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
                if !is_word || label_names.contains(span.as_str()) || !all_checked {
                    continue;
                }
                given += 1;
                let known = pairs
                    .iter()
                    .any(|p| matches!(recorded.get(p), Some(Some(v)) if v.contains(&span)));
                if !known {
                    let of: Vec<String> = pairs
                        .iter()
                        .map(|(m, l)| {
                            format!(
                                "{m}{{{l}}}: {:?}",
                                recorded[&(m.clone(), l.clone())].as_ref().unwrap()
                            )
                        })
                        .collect();
                    bad.push(format!(
                        "{}: `{span}` is given as a label value, but the code records none such ({})",
                        at(&file, *line),
                        of.join("; ")
                    ));
                }
            }
        }
    }
    assert!(
        given > 40,
        "only {given} label values found in the runbook's metric tables: is the reader broken?"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
