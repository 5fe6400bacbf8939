//! Alert rules ↔ runbook: every alert of deploy/prometheus/alerts.yml links a
//! section of docs/operations.md that exists and is named after it, every
//! `### Stockd…` runbook section is an alert that still exists, and every alert
//! has a promtool unit test in alerts_test.yml (whose firing the deploy tests
//! run). An operator paged at night follows the link; it must lead somewhere.

use std::collections::BTreeSet;

use serde_yaml::Value;

use super::markdown::heading_slugs;
use super::{prose_lines, read};

const RULES: &str = "deploy/prometheus/alerts.yml";
const RULE_TESTS: &str = "deploy/prometheus/alerts_test.yml";
const RUNBOOK: &str = "docs/operations.md";

/// (alert name, its `runbook` annotation) of every alerting rule.
fn alerts() -> Vec<(String, Option<String>)> {
    let doc: Value = serde_yaml::from_str(&read(RULES)).unwrap();
    let mut out = Vec::new();
    for group in doc["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            if let Some(name) = rule["alert"].as_str() {
                let runbook = rule["annotations"]["runbook"].as_str().map(str::to_string);
                out.push((name.to_string(), runbook));
            }
        }
    }
    out
}

#[test]
fn every_alert_links_its_runbook_section() {
    let slugs = heading_slugs(&read(RUNBOOK));
    let mut bad = Vec::new();
    for (name, runbook) in alerts() {
        let want = format!("{RUNBOOK}#{}", name.to_lowercase());
        match runbook {
            None => bad.push(format!("{name}: no `runbook` annotation")),
            Some(r) if r != want => bad.push(format!("{name}: runbook {r}, expected {want}")),
            Some(_) if !slugs.contains(&name.to_lowercase()) => {
                bad.push(format!("{name}: {RUNBOOK} has no heading `{name}`"))
            }
            Some(_) => {}
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_runbook_alert_section_is_an_alert() {
    let names: BTreeSet<String> = alerts().into_iter().map(|(n, _)| n).collect();
    let text = read(RUNBOOK);
    let stale: Vec<String> = prose_lines(&text)
        .iter()
        .filter_map(|l| l.strip_prefix("### Stockd"))
        .map(|rest| format!("Stockd{}", rest.trim()))
        .filter(|h| !names.contains(h))
        .collect();
    assert!(
        stale.is_empty(),
        "{RUNBOOK} has sections for alerts {RULES} lacks: {stale:?}"
    );
}

#[test]
fn every_alert_has_a_promtool_unit_test() {
    let tests: Value = serde_yaml::from_str(&read(RULE_TESTS)).unwrap();
    let mut tested = BTreeSet::new();
    for t in tests["tests"].as_sequence().unwrap() {
        for case in t["alert_rule_test"].as_sequence().into_iter().flatten() {
            if let Some(n) = case["alertname"].as_str() {
                tested.insert(n.to_string());
            }
        }
    }
    let untested: Vec<String> = alerts()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !tested.contains(n))
        .collect();
    assert!(
        untested.is_empty(),
        "alerts without a test in {RULE_TESTS}: {untested:?}"
    );
}
