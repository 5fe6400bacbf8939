//! Beyond the key tables, the docs name configuration keys in running text
//! (about 500 times): every `section.key` they name must be a key of
//! config/base.yaml (a renamed key leaves no stale mention), and a default
//! given beside it as "`key` (N)" must be base.yaml's.

use std::collections::BTreeSet;

use serde_yaml::Value;

use super::log_source::logged;
use super::{at, code_spans, markdown_files, prose_lines, read};

const BASE: &str = "config/base.yaml";
/// Endings of file names (`http.rs`, `reserve.lua`), not keys.
const FILE_ENDINGS: [&str; 4] = [".rs", ".lua", ".yaml", ".sql"];

/// The value at a dotted key; `a.{b,c}` is the mapping `a`, and `a.b_*` the
/// mapping `a` when one of its keys starts with `b_`.
fn lookup<'a>(base: &'a Value, key: &str) -> Option<&'a Value> {
    let stem = key.split(['*', '{']).next().unwrap();
    let (parent, partial) = stem.rsplit_once('.').unwrap_or(("", stem));
    let value = parent
        .split('.')
        .try_fold(base, |v, part| v.as_mapping()?.get(part))?;
    if partial.is_empty() {
        return Some(value);
    }
    let map = value.as_mapping()?;
    if stem.len() == key.len() {
        return map.get(partial);
    }
    map.keys()
        .any(|k| k.as_str().is_some_and(|k| k.starts_with(partial)))
        .then_some(value)
}

/// `` `section.key` `` spans of a line whose first word is a section. Dotted
/// names that share a section's first word but are no keys are the log's
/// names and trace attributes (`consumer.rejected`, `http.route`): those
/// docs::log_lines checks.
fn key_mentions(line: &str, base: &Value, log_names: &BTreeSet<String>) -> Vec<String> {
    code_spans(line)
        .into_iter()
        .filter(|s| {
            let section = s.split('.').next().unwrap();
            s.contains('.')
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || "_.*{},".contains(c))
                && base.as_mapping().unwrap().contains_key(section)
                && !FILE_ENDINGS.iter().any(|e| s.ends_with(e))
                && !log_names.contains(s)
        })
        .collect()
}

#[test]
fn every_key_named_in_the_docs_exists_with_the_default_given() {
    let base: Value = serde_yaml::from_str(&read(BASE)).unwrap();
    let log_names = logged().names;
    let mut bad = Vec::new();
    let mut named = 0;
    for file in markdown_files() {
        let text = read(&file);
        for (n, line) in prose_lines(&text).iter().enumerate() {
            for key in key_mentions(line, &base, &log_names) {
                named += 1;
                let Some(value) = lookup(&base, &key) else {
                    bad.push(format!(
                        "{}: `{key}` is not a key of {BASE}",
                        at(&file, n + 1)
                    ));
                    continue;
                };
                // "`key` (N)": a number in parentheses right after the key.
                let after = format!("`{key}` (");
                for (i, _) in line.match_indices(&after) {
                    let rest = &line[i + after.len()..];
                    let said = &rest[..rest.find(')').unwrap_or(0)];
                    let is_number = !said.is_empty() && said.chars().all(|c| c.is_ascii_digit());
                    if is_number && serde_yaml::to_string(value).unwrap().trim() != said {
                        bad.push(format!(
                            "{}: `{key}` ({said}), but {BASE} sets {}",
                            at(&file, n + 1),
                            serde_yaml::to_string(value).unwrap().trim()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        named > 100,
        "only {named} key mentions found: is the reader broken?"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
