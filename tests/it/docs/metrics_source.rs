//! What stockd records as metrics, read from the source: every `counter!`,
//! `gauge!` and `histogram!` of src/ (the load generator, bench/, only
//! reads them), its name a literal or a `&str` constant, its labels the
//! `"label" => value` pairs (or a `let labels = [("label", value), …]` passed
//! by reference). That is the exposition `/metrics` gives after a run, without
//! the run: docs::metrics checks metric and label names with it,
//! docs::metric_labels the label values.

use std::collections::{BTreeMap, BTreeSet};

use super::source_files;

const MACROS: [&str; 3] = ["counter!(", "gauge!(", "histogram!("];

/// One metrics macro call.
pub struct Call {
    /// `path:line` of the call.
    pub at: String,
    /// The metric's names (a constant may have several values:
    /// `C::BATCH_SIZE_METRIC` is one per lane kind).
    pub names: Vec<String>,
    /// (label, the expression of its value as written: `"rejected"`, `label`).
    pub labels: Vec<(String, String)>,
}

/// Every metrics macro call of src/ that records a `stockd_*` metric.
pub fn calls() -> Vec<Call> {
    let files: Vec<(String, String)> = source_files("src");
    let mut consts: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, text) in &files {
        for (ident, value) in str_consts(text) {
            consts.entry(ident).or_default().push(value);
        }
    }
    let mut out = Vec::new();
    for (path, text) in &files {
        for (at, call) in macro_calls(text) {
            let first = call.split(',').next().unwrap().trim();
            let names: Vec<String> = match first.strip_prefix('"') {
                Some(lit) => vec![lit.trim_end_matches('"').to_string()],
                None => consts
                    .get(first.rsplit("::").next().unwrap())
                    .cloned()
                    .unwrap_or_default(),
            };
            let names: Vec<String> = names
                .into_iter()
                .filter(|n| n.starts_with("stockd_"))
                .collect();
            if names.is_empty() {
                continue;
            }
            out.push(Call {
                at: format!("{path}:{}", text[..at].lines().count() + 1),
                names,
                labels: labels_of(&call, &text[..at]),
            });
        }
    }
    out
}

/// Metric name → label names, from every metrics macro of src/.
pub fn recorded() -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for call in calls() {
        for name in call.names {
            let labels = out.entry(name).or_default();
            labels.extend(call.labels.iter().map(|(l, _)| l.clone()));
        }
    }
    out
}

/// `const NAME: &str = "value";` (also `&'static str`) of one file.
pub fn str_consts(text: &str) -> Vec<(String, String)> {
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
            let end = closing(args, 1).unwrap_or(args.len());
            out.push((i, args[..end].to_string()));
        }
    }
    out
}

/// Where the bracket closing `depth` open ones is, or (`depth` 0) the first
/// top-level comma.
fn closing(text: &str, depth: i32) -> Option<usize> {
    let mut depth = depth;
    let stop_at_comma = depth == 0;
    text.char_indices()
        .find(|(_, c)| {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                ',' if stop_at_comma && depth == 0 => return true,
                _ => {}
            }
            depth < 0 || (!stop_at_comma && depth == 0)
        })
        .map(|(j, _)| j)
}

/// The labels of one call with their value expressions: every `"name" =>
/// value`, or, for labels passed as a variable (`&labels`), every `("name",
/// value)` of its `let labels = [...]` before the call.
fn labels_of(call: &str, before_call: &str) -> Vec<(String, String)> {
    let pairs: Vec<(String, String)> = call
        .match_indices("=>")
        .filter_map(|(i, _)| {
            let before = call[..i].trim_end().strip_suffix('"')?;
            let name = before[before.rfind('"')? + 1..].to_string();
            let rest = &call[i + 2..];
            let value = &rest[..closing(rest, 0).unwrap_or(rest.len())];
            Some((name, value.trim().to_string()))
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
        .filter_map(|(i, _)| {
            let (name, rest) = list[i + 2..].split_once('"')?;
            let rest = rest.trim_start().strip_prefix(',')?;
            let value = &rest[..closing(rest, 1).unwrap_or(rest.len())];
            Some((name.to_string(), value.trim().to_string()))
        })
        .collect()
}

/// A metric as the docs write it: `name`, `name{a,b}`, `name{a="x"}` or
/// `name{a="x"|"y"}` → (name, [(label, the values given)]); a sample's
/// value after the braces (`name{a="x"} 1`) is left out.
pub fn mention(span: &str) -> (String, Vec<(String, Vec<String>)>) {
    let (name, labels) = match span.split_once('{') {
        Some((n, l)) => (n, l.split('}').next().unwrap()),
        None => (span, ""),
    };
    let labels = labels
        .split(',')
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (label, values) = l.split_once('=').unwrap_or((l, ""));
            let values = values
                .split('|')
                .map(|v| v.trim().trim_matches('"').to_string())
                .filter(|v| !v.is_empty())
                .collect();
            (label.trim().to_string(), values)
        })
        .collect();
    (name.to_string(), labels)
}
