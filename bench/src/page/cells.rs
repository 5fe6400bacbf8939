//! How a value of the committed JSON becomes text in the generated block:
//! shared by the block and each of its tables, so a table file never needs
//! the block's own file (which needs the tables).

use serde_json::Value;

/// A JSON scalar as text; `unknown` when absent (an older bench.json).
pub(super) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "unknown".into(),
        other => other.to_string(),
    }
}

/// A table cell: `|` escaped, one line.
pub(super) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
