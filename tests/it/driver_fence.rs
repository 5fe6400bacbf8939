//! Each driver stays behind its adapter: `mysql_async` is named only under
//! `src/db/`, `redis` and `deadpool_redis` only under `src/redis/`, `lapin`
//! only under `src/mq/`, and `utoipa` (the OpenAPI derives and builders) only
//! under `src/roles/api/`; and SQL is written only under `src/db/`. So a
//! reader finds every use of a driver, every statement and every piece of
//! the API description where the folder names say, and a driver upgrade
//! touches one folder. The load generator, a crate of its own (`bench/`),
//! drives the stores as a client of its own and is not read here.
//!
//! Read from the sources, comment lines aside. A crate is named by a path
//! that starts with it (`lapin::options::…`, `use lapin::…`,
//! `#[derive(utoipa::ToSchema)]`): `crate::redis::…` is this crate's adapter,
//! not the driver. A statement is a string literal that starts with a SQL
//! verb and a space or line break (docs/architecture.md, "Modules and the
//! direction of dependencies"). A failure names the file and line.

use crate::helpers::sources::{sources, src_dir};

/// A crate and the folder of `src/` it may be named in.
struct Fence {
    krate: &'static str,
    home: &'static str,
}

const FENCES: &[Fence] = &[
    Fence {
        krate: "mysql_async",
        home: "db/",
    },
    Fence {
        krate: "redis",
        home: "redis/",
    },
    Fence {
        krate: "deadpool_redis",
        home: "redis/",
    },
    Fence {
        krate: "lapin",
        home: "mq/",
    },
    Fence {
        krate: "utoipa",
        home: "roles/api/",
    },
];

/// Where SQL may be written.
const SQL_HOME: &str = "db/";

/// The statements a string literal may start with.
const SQL_VERBS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "CREATE", "ALTER", "DROP", "TRUNCATE",
];

/// `text` with its comment lines blanked (kept as empty lines, so offsets
/// still give line numbers).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("//") {
                ""
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The 1-based line of byte offset `at`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Byte ranges of `text`'s `use` declarations (`use` … `;`).
fn use_declarations(text: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("use ") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(is_ident) {
            continue;
        }
        if let Some(len) = text[at..].find(';') {
            found.push((at, at + len + 1));
        }
    }
    found
}

/// The offsets at which `text` names the crate `krate`: a `use` (or `extern
/// crate`) whose path starts with it, or a path elsewhere that starts with
/// `krate::` (not `crate::krate::`, `self::krate::` nor `other::krate::`).
fn names_crate(text: &str, krate: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let uses = use_declarations(text);
    for &(start, end) in &uses {
        let path = text[start + "use ".len()..end].trim_start();
        let path = path.strip_prefix("::").unwrap_or(path);
        let root: String = path.chars().take_while(|&c| is_ident(c)).collect();
        if root == krate {
            found.push(start);
        }
    }
    for (at, _) in text.match_indices(krate) {
        if uses.iter().any(|&(start, end)| (start..end).contains(&at)) {
            continue;
        }
        let before = text[..at].trim_end_matches(' ');
        let after = &text[at + krate.len()..];
        let whole_word = !before.ends_with(is_ident) && !after.starts_with(is_ident);
        let path_root = after.trim_start().starts_with("::") && !before.ends_with("::");
        let extern_crate = before.ends_with("extern crate");
        if whole_word && (path_root || extern_crate) {
            found.push(at);
        }
    }
    found
}

/// The offsets of string literals in `text` that start a SQL statement: a
/// quote (plain or raw), spaces, an upper-case verb, then a space or line
/// break (a bare `"UPDATE"`, a span attribute's value, is no statement).
fn writes_sql(text: &str) -> Vec<usize> {
    text.match_indices('"')
        .filter(|&(at, _)| {
            let rest = text[at + 1..].trim_start();
            SQL_VERBS.iter().any(|verb| {
                rest.strip_prefix(verb)
                    .is_some_and(|after| after.starts_with([' ', '\n']))
            })
        })
        .map(|(at, _)| at)
        .collect()
}

/// Every file of `src/` the fences hold, as (path under `src/`, code).
fn fenced_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    sources(&src_dir(""), &mut files);
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src_dir("")).unwrap().to_string_lossy();
        let rel = rel.replace('\\', "/");
        let code = without_comments(&std::fs::read_to_string(&file).unwrap());
        out.push((rel, code));
    }
    out
}

/// What breaks the fences in `code` of `src/<rel>`, one line each.
fn violations(rel: &str, code: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    for fence in FENCES.iter().filter(|f| !rel.starts_with(f.home)) {
        for at in names_crate(code, fence.krate) {
            wrong.push(format!(
                "src/{rel}:{} names `{}`: only src/{} may; use its functions and types",
                line_of(code, at),
                fence.krate,
                fence.home
            ));
        }
    }
    if !rel.starts_with(SQL_HOME) {
        for at in writes_sql(code) {
            wrong.push(format!(
                "src/{rel}:{} writes SQL: move it into a function under src/{SQL_HOME}",
                line_of(code, at)
            ));
        }
    }
    wrong
}

#[test]
fn drivers_sql_and_openapi_stay_in_their_adapters() {
    let mut wrong = Vec::new();
    for (rel, code) in fenced_files() {
        wrong.extend(violations(&rel, &code));
    }
    assert!(wrong.is_empty(), "outside their adapters: {wrong:#?}");
}

/// The fences reach every adapter's crate: each is named in its home folder
/// (a renamed crate or folder would otherwise leave a fence guarding nothing).
#[test]
fn every_fenced_crate_is_named_at_home() {
    let files = fenced_files();
    for fence in FENCES {
        let at_home = files.iter().any(|(rel, code)| {
            rel.starts_with(fence.home) && !names_crate(code, fence.krate).is_empty()
        });
        assert!(
            at_home,
            "{} is named nowhere under src/{}",
            fence.krate, fence.home
        );
    }
}

#[test]
fn a_crate_is_told_from_the_adapter_of_its_name() {
    let text = "use crate::redis::RedisStore;\nuse crate::{db::Db, redis::Keys};\n\
                fn f(redis: &RedisStore) { crate::redis::keys::x(); super::redis::y(); }";
    assert!(names_crate(text, "redis").is_empty());
    let text = "use deadpool_redis::redis;\nfn f() { redis::cmd(\"GET\"); }";
    assert_eq!(names_crate(text, "deadpool_redis").len(), 1);
    assert_eq!(names_crate(text, "redis").len(), 1);
    assert_eq!(line_of(text, names_crate(text, "redis")[0]), 2);
    let text =
        "#[derive(Debug, utoipa::ToSchema)]\nstruct A;\nuse lapin::{options, BasicProperties};";
    assert_eq!(names_crate(text, "utoipa").len(), 1);
    assert_eq!(names_crate(text, "lapin").len(), 1);
    assert!(names_crate("let lapin_x = 1; \"lapin=warn\"", "lapin").is_empty());
}

#[test]
fn a_statement_is_told_from_a_bare_verb() {
    assert_eq!(
        writes_sql("q.exec_drop(\"UPDATE orders SET x = 1\", ())").len(),
        1
    );
    assert_eq!(
        writes_sql("exec_first(\n  \"\n  SELECT a\nFROM t\", ())").len(),
        1
    );
    assert_eq!(writes_sql("r#\"DELETE FROM t\"#").len(), 1);
    assert_eq!(writes_sql("\"CREATE DATABASE x\"").len(), 1);
    assert!(writes_sql("KeyValue::new(\"db.operation.name\", \"UPDATE\")").is_empty());
    assert!(writes_sql("\"Selected SKUs\"").is_empty());
}
