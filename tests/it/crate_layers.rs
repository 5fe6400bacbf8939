//! The crate's top-level modules import downwards only (docs/architecture.md,
//! "Modules and the direction of dependencies"). Each module has a floor; a file
//! may name, through `crate::`, only modules on a lower floor — so no two
//! modules of one floor (the adapters `redis`, `mq`, `db`) see each other, no
//! module reaches up (`telemetry` into the stores, `ops` into `roles`), and no
//! loop can form. Read from the sources: a new `use` that points up fails here.
//!
//! The MySQL adapter is also the one home of SQL: a statement written outside
//! `src/db/`, or a `mysql_async` named outside it, fails here too
//! (`config/mysql.rs`'s URL check aside; the load generator, a crate of its
//! own under bench/, drives MySQL as a client), so the next reader of a query
//! finds it beside the others of its table.

use std::collections::BTreeMap;

use crate::helpers::sources::{code_of, names_after, sources, src_dir};

/// Every top-level module of `src/` and its floor, as the drawing in
/// docs/architecture.md has them (0 is the ground).
const FLOORS: &[(&str, u8)] = &[
    ("domain", 0),
    ("clock", 0),
    ("shutdown", 0),
    ("config", 1),
    ("health", 1),
    ("sdnotify", 1),
    ("tls", 2),
    ("events", 2),
    ("redis", 3),
    ("mq", 3),
    ("db", 3),
    ("alert", 3),
    ("otel", 3),
    ("resources", 4),
    ("outbox", 4),
    ("soldout", 4),
    ("telemetry", 4),
    ("ops", 5),
    ("roles", 6),
    ("cli_jobs", 6),
    ("cli", 8),
    ("cli_dlq", 9),
];

/// The top-level module a file under `src/` belongs to (`None`: lib.rs, main.rs).
fn module_of(file: &std::path::Path) -> Option<String> {
    let rel = file.strip_prefix(src_dir("")).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

#[test]
fn the_top_level_modules_import_downwards_only() {
    let floors: BTreeMap<&str, u8> = FLOORS.iter().copied().collect();
    let mut files = Vec::new();
    sources(&src_dir(""), &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let Some(module) = module_of(&file) else {
            continue;
        };
        let Some(&floor) = floors.get(module.as_str()) else {
            wrong.push(format!("src/{module} has no floor: add it to FLOORS"));
            continue;
        };
        let text = code_of(&std::fs::read_to_string(&file).unwrap());
        for named in names_after(&text, "crate::") {
            let Some(&other) = floors.get(named) else {
                continue;
            };
            if named != module && other >= floor {
                wrong.push(format!(
                    "{} (floor {floor}) imports {named} (floor {other})",
                    file.display()
                ));
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(wrong.is_empty(), "imports against the layering: {wrong:#?}");
}

/// The list above names every module `lib.rs` declares, and nothing else.
#[test]
fn every_module_has_a_floor() {
    let lib = std::fs::read_to_string(src_dir("lib.rs")).unwrap();
    let mut declared: Vec<&str> = names_after(&lib, "pub mod ").into_iter().collect();
    let mut listed: Vec<&str> = FLOORS.iter().map(|(name, _)| *name).collect();
    declared.sort_unstable();
    listed.sort_unstable();
    assert_eq!(declared, listed);
}

/// Where `mysql_async` may be named outside `src/db/`: the URL check of the
/// configuration (floor 1, below `db`).
const MYSQL_OUTSIDE_DB: &[&str] = &["config/mysql.rs"];

/// The SQL statements a string literal may start with.
const SQL_VERBS: &[&str] = &["SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE"];

/// Whether `text` holds a string literal that starts a SQL statement: a
/// quote (plain or raw), spaces, an upper-case verb, then a space or line
/// break (a bare `"UPDATE"`, a span attribute's value, is no statement).
fn writes_sql(text: &str) -> bool {
    text.match_indices('"').any(|(at, _)| {
        let rest = text[at + 1..].trim_start();
        SQL_VERBS.iter().any(|verb| {
            rest.strip_prefix(verb)
                .is_some_and(|after| after.starts_with([' ', '\n']))
        })
    })
}

#[test]
fn sql_and_the_mysql_driver_stay_in_db() {
    let mut files = Vec::new();
    sources(&src_dir(""), &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src_dir("")).unwrap().to_string_lossy();
        let rel = rel.replace('\\', "/");
        if rel.starts_with("db/") {
            continue;
        }
        let text = code_of(&std::fs::read_to_string(&file).unwrap());
        if writes_sql(&text) {
            wrong.push(format!(
                "src/{rel} writes SQL: move it into a function under src/db/"
            ));
        }
        let allowed = MYSQL_OUTSIDE_DB.iter().any(|ok| rel.starts_with(ok));
        if !allowed && text.contains("mysql_async") {
            wrong.push(format!(
                "src/{rel} names mysql_async: use src/db/'s functions and types"
            ));
        }
    }
    assert!(wrong.is_empty(), "MySQL outside src/db/: {wrong:#?}");
}

#[test]
fn a_statement_is_told_from_a_bare_verb() {
    assert!(writes_sql("q.exec_drop(\"UPDATE orders SET x = 1\", ())"));
    assert!(writes_sql("exec_first(\n  \"\n  SELECT a\nFROM t\", ())"));
    assert!(writes_sql("r#\"DELETE FROM t\"#"));
    assert!(!writes_sql(
        "KeyValue::new(\"db.operation.name\", \"UPDATE\")"
    ));
    assert!(!writes_sql("\"Selected SKUs\""));
}
