//! Contract §4's schema table is the schema the migrations build: one row per
//! table of sql/, naming every column (but the `created_at` / `updated_at`
//! timestamps) and no column the migrations do not create.
//!
//! The migrations are read as stockd writes them: `CREATE TABLE IF NOT EXISTS
//! name (` with one column or key per line, and `ALTER TABLE name` followed by
//! `ADD COLUMN IF NOT EXISTS col` lines.

use std::collections::{BTreeMap, BTreeSet};

use super::{at, code_spans, read, root, tables};

const CONTRACT: &str = "docs/contract.md";
/// Lines of a `CREATE TABLE` body that are keys or constraints, not columns.
const NOT_COLUMNS: [&str; 7] = [
    "PRIMARY",
    "KEY",
    "INDEX",
    "UNIQUE",
    "CONSTRAINT",
    "CHECK",
    "FOREIGN",
];
/// The timestamps every table has, left out of the table ("beyond timestamps").
const TIMESTAMPS: [&str; 2] = ["created_at", "updated_at"];

type Schema = BTreeMap<String, BTreeSet<String>>;

fn migrated() -> Schema {
    let mut files: Vec<_> = std::fs::read_dir(root().join("sql"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    let mut schema = Schema::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let mut table: Option<String> = None;
        let mut creating = false;
        for line in text.lines().map(|l| l.split("--").next().unwrap().trim()) {
            let words: Vec<&str> = line.split_whitespace().collect();
            if let Some(name) = line.strip_prefix("CREATE TABLE IF NOT EXISTS ") {
                let name = name.trim_end_matches('(').trim().to_string();
                schema.entry(name.clone()).or_default();
                table = Some(name);
                creating = true;
            } else if let Some(name) = line.strip_prefix("ALTER TABLE ") {
                table = Some(name.trim().to_string());
                creating = false;
            } else if line.starts_with(')') {
                creating = false;
            } else if let Some(t) = &table {
                let column = if creating {
                    words.first().filter(|w| !NOT_COLUMNS.contains(w))
                } else if line.starts_with("ADD COLUMN") {
                    // `ADD COLUMN [IF NOT EXISTS] name TYPE ...`
                    words.get(if words.get(2) == Some(&"IF") { 5 } else { 2 })
                } else {
                    None
                };
                if let Some(c) = column.filter(|c| !TIMESTAMPS.contains(c)) {
                    schema.get_mut(t).unwrap().insert(c.to_string());
                }
            }
        }
    }
    schema
}

/// A cell without its parenthesized notes (`` `x` (`sku:count,...`) ``): the
/// columns are the spans outside them.
fn outside_parens(cell: &str) -> String {
    let mut depth = 0;
    cell.chars()
        .filter(|c| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

#[test]
fn the_schema_table_is_the_migrated_schema() {
    let migrated = migrated();
    let text = read(CONTRACT);
    let table = tables(&text)
        .into_iter()
        .find(|t| t.first_header_is("table"))
        .expect("contract §4 has a table headed `table`");
    let mut bad = Vec::new();
    let mut seen = BTreeSet::new();
    for (line, row) in &table.rows {
        let name = code_spans(&row[0]).first().cloned().unwrap_or_default();
        let documented: BTreeSet<String> =
            code_spans(&outside_parens(&row[1])).into_iter().collect();
        let Some(columns) = migrated.get(&name) else {
            bad.push(format!(
                "{}: no migration creates table `{name}`",
                at(CONTRACT, *line)
            ));
            continue;
        };
        let missing: Vec<_> = columns.difference(&documented).collect();
        let extra: Vec<_> = documented.difference(columns).collect();
        if !missing.is_empty() || !extra.is_empty() {
            bad.push(format!(
                "{}: `{name}`: the row lacks {missing:?}; no migration creates {extra:?}",
                at(CONTRACT, *line)
            ));
        }
        seen.insert(name);
    }
    for name in migrated.keys().filter(|n| !seen.contains(*n)) {
        bad.push(format!("{CONTRACT} §4: no row for table `{name}`"));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
