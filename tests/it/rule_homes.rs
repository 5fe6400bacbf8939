//! Every rule one home (docs/architecture.md, "Where each rule lives"): the
//! table there names, per rule, the one file that states it and the code shape
//! that gives it away; this test looks for each shape in every file of `src/`
//! (Rust and Lua) and fails on a second home, naming the file and line. The
//! table and the detectors below must name the same rules, so a row cannot be
//! dropped to silence a failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::helpers::sources::src_dir;

/// The language a detector reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lang {
    Rust,
    Lua,
}

/// One rule's give-away shape, matched line by line (comments skipped).
struct Detector {
    name: &'static str,
    lang: Lang,
    matches: fn(&str) -> bool,
}

/// A comparison operator between two values, spaced as `cargo fmt` and the
/// Lua of `src/redis/lua/` write them.
fn compares(line: &str) -> bool {
    [" < ", " > ", " <= ", " >= "]
        .iter()
        .any(|op| line.contains(op))
}

const DETECTORS: &[Detector] = &[
    Detector {
        name: "state-machine",
        lang: Lang::Rust,
        matches: |l| l.contains("fn can_become"),
    },
    Detector {
        name: "due-rust",
        lang: Lang::Rust,
        matches: |l| {
            l.contains("expires")
                && (l.contains("now") || l.contains("cutoff"))
                && compares(l)
                && !l.contains('"')
        },
    },
    Detector {
        name: "due-sql",
        lang: Lang::Rust,
        matches: |l| {
            ["<", ">", "<=", ">="]
                .iter()
                .any(|op| l.contains(&format!("expires_at_ms {op} ?")))
                && !l.contains("extensions")
        },
    },
    Detector {
        name: "soldout-write",
        lang: Lang::Lua,
        matches: |l| l.contains("'soldout'") && (l.contains("'HSET'") || l.contains("'HDEL'")),
    },
    Detector {
        name: "soldout-tell",
        lang: Lang::Lua,
        matches: |l| l.contains("'S:'") || l.contains("'A:'"),
    },
    Detector {
        name: "limit-lua",
        lang: Lang::Lua,
        matches: |l| l.contains("count >") && l.contains("limit"),
    },
    Detector {
        name: "rate-lua",
        lang: Lang::Lua,
        matches: |l| l.contains("1000 / rps"),
    },
    Detector {
        name: "quota-back",
        lang: Lang::Lua,
        matches: |l| l.contains("'n', -") || (l.contains("'HDEL'") && l.contains("'n')")),
    },
    Detector {
        name: "hold-record",
        lang: Lang::Lua,
        matches: |l| l.contains("'HSET'") && l.contains("'count'") && l.contains("'RESERVED'"),
    },
    Detector {
        name: "budget-line",
        lang: Lang::Rust,
        matches: |l| l.contains("format!(\"{sku_id}:{") || l.contains("format!(\"{sku}:{"),
    },
    Detector {
        name: "sale-gate-lua",
        lang: Lang::Lua,
        matches: |l| l.contains("'SALE_NOT_STARTED'"),
    },
    Detector {
        name: "sale-window-rust",
        lang: Lang::Rust,
        matches: |l| l.contains("opens") && l.contains("now") && compares(l) && !l.contains('"'),
    },
    Detector {
        name: "limit-rust",
        lang: Lang::Rust,
        matches: |l| l.contains("count >") && l.contains("limit"),
    },
    Detector {
        name: "store-gap",
        lang: Lang::Rust,
        matches: |l| {
            l.contains("redis")
                && l.contains("available")
                && (l.contains("mysql_available") || l.contains("available_stock"))
                && [" - ", " != ", " == "].iter().any(|op| l.contains(op))
                && !l.contains('"')
        },
    },
];

/// One row of the table: the detectors it names and its home.
struct Row {
    detectors: Vec<String>,
    home: String,
}

/// The rows of "Where each rule lives": the home is the first `src/…` path
/// of the second column; a detector is a backticked name followed by `:` in
/// the third.
fn table() -> Vec<Row> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let section = doc
        .split("\n## Where each rule lives\n")
        .nth(1)
        .expect("docs/architecture.md has a section \"Where each rule lives\"");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| rule "))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            assert!(cells.len() >= 3, "a row of three columns: {line}");
            let home = cells[1]
                .split('`')
                .find(|part| part.starts_with("src/"))
                .unwrap_or_else(|| panic!("no `src/...` home in: {line}"))
                .to_string();
            let detectors = cells[2]
                .split('`')
                .collect::<Vec<_>>()
                .windows(2)
                .filter(|w| w[1].starts_with(':'))
                .map(|w| w[0].to_string())
                .collect();
            Row { detectors, home }
        })
        .collect()
}

/// Every file a detector of `lang` reads: `.rs` files of `src/` or the
/// scripts of `src/redis/lua/` and its `lib/`.
fn files(lang: Lang) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, ext, out);
            } else if path.extension().is_some_and(|e| e == ext) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    match lang {
        Lang::Rust => walk(&src_dir(""), "rs", &mut out),
        Lang::Lua => walk(&src_dir("redis/lua"), "lua", &mut out),
    }
    out
}

/// The lines of `files` (path relative to the crate, text) where `detector`
/// finds its rule outside `home`: `path:line: text`.
fn second_homes(detector: &Detector, home: &str, files: &[(String, String)]) -> Vec<String> {
    let comment = match detector.lang {
        Lang::Rust => "//",
        Lang::Lua => "--",
    };
    let mut found = Vec::new();
    for (path, text) in files {
        if path == home {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if !line.trim_start().starts_with(comment) && (detector.matches)(line) {
                found.push(format!("{path}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

fn read(lang: Lang) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    files(lang)
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, text)
        })
        .collect()
}

#[test]
fn every_rule_in_the_table_has_one_home_and_no_second() {
    let rows = table();
    let named: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.detectors.iter().map(String::as_str))
        .collect();
    let known: BTreeSet<&str> = DETECTORS.iter().map(|d| d.name).collect();
    assert_eq!(
        named, known,
        "left: the detectors docs/architecture.md names, right: this test's"
    );
    let rust = read(Lang::Rust);
    let lua = read(Lang::Lua);
    let mut failures = Vec::new();
    for row in &rows {
        for name in &row.detectors {
            let detector = DETECTORS.iter().find(|d| d.name == name).unwrap();
            let files = if detector.lang == Lang::Rust {
                &rust
            } else {
                &lua
            };
            let home = files.iter().find(|(path, _)| *path == row.home);
            let Some((_, text)) = home else {
                failures.push(format!(
                    "{name}: the home {} is not a file it reads",
                    row.home
                ));
                continue;
            };
            if !text.lines().any(detector.matches) {
                failures.push(format!(
                    "{name}: the home {} does not state the rule",
                    row.home
                ));
            }
            for line in second_homes(detector, &row.home, files) {
                failures.push(format!(
                    "{name}: a second home of a rule of {}: {line}",
                    row.home
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The check can fail: a copy of the sold-out marker's write or of a held
/// line's record write in another script, of the expiry comparison or of a comparison of the two stores'
/// `available` in another Rust file, is reported with its file and line.
#[test]
fn a_second_home_is_reported_with_its_file_and_line() {
    let by = |name: &str| DETECTORS.iter().find(|d| d.name == name).unwrap();
    let lua = vec![
        (
            "src/redis/lua/lib/soldout.lua".to_string(),
            "  return redis.call('HSET', sku_key, 'soldout', '1') == 1\n".to_string(),
        ),
        (
            "src/redis/lua/new.lua".to_string(),
            "-- a comment on 'soldout' and 'HSET' is no home\nredis.call('HSET', KEYS[1], 'soldout', '1')\n"
                .to_string(),
        ),
    ];
    assert_eq!(
        second_homes(by("soldout-write"), "src/redis/lua/lib/soldout.lua", &lua),
        ["src/redis/lua/new.lua:2: redis.call('HSET', KEYS[1], 'soldout', '1')"]
    );
    let record = vec![(
        "src/redis/lua/new.lua".to_string(),
        "redis.call('HSET', KEYS[2], 'user', u, 'count', c, 'status', 'RESERVED')\n".to_string(),
    )];
    assert_eq!(
        second_homes(by("hold-record"), "src/redis/lua/lib/hold.lua", &record),
        ["src/redis/lua/new.lua:1: redis.call('HSET', KEYS[2], 'user', u, 'count', c, 'status', 'RESERVED')"]
    );
    let rust = vec![(
        "src/ops/new.rs".to_string(),
        "    if row.expires_at_ms <= now_ms {\n".to_string(),
    )];
    assert_eq!(
        second_homes(by("due-rust"), "src/domain/reservation.rs", &rust),
        ["src/ops/new.rs:1: if row.expires_at_ms <= now_ms {"]
    );
    let own_compare = vec![(
        "src/ops/audit_again.rs".to_string(),
        "        Some(redis) if redis.available != facts.available_stock => {\n".to_string(),
    )];
    assert_eq!(
        second_homes(by("store-gap"), "src/ops/compare/verdict.rs", &own_compare),
        ["src/ops/audit_again.rs:1: Some(redis) if redis.available != facts.available_stock => {"]
    );
}
