//! The docs render as written and their links lead somewhere: no table is cut
//! by a blank line (GitHub renders the rows after it as a paragraph, as the
//! README's TLS rows and the runbook's `MYSQL_BEHIND` verdict were), every row
//! has its header's cells, and every relative link names a file of the
//! repository and, with `#anchor`, a heading of that file; every file path
//! a code span names is a file of the repository (not one beside it).

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use super::{at, exists, markdown_files, outside_code_spans, prose_lines, read, tables};

/// A table row, a blank line, then a row that starts no table of its own (no
/// delimiter row under it): one table cut in two.
#[test]
fn no_table_is_cut_by_a_blank_line() {
    let mut bad = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        let lines = prose_lines(&text);
        for i in 2..lines.len() {
            let row = |l: &str| l.starts_with('|');
            let starts_table = lines.get(i + 1).is_some_and(|l| l.starts_with("|-"));
            if row(lines[i]) && !starts_table && lines[i - 1].trim().is_empty() && row(lines[i - 2])
            {
                bad.push(format!("{}: blank line inside a table", at(&file, i)));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Each row has the header's number of cells: an unescaped `|` (in a code
/// span too) splits a cell, and GitHub drops what overflows.
#[test]
fn every_table_row_has_the_headers_cells() {
    let mut bad = Vec::new();
    for file in markdown_files() {
        for table in tables(&read(&file)) {
            for (line, cells) in &table.rows {
                if cells.len() != table.header.len() {
                    bad.push(format!(
                        "{}: {} cells, the header has {} (escape `|` as `\\|`)",
                        at(&file, *line),
                        cells.len(),
                        table.header.len()
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Every `[text](target)` that is not a URL names an existing file, and its
/// `#anchor` a heading of that file (GitHub's slugs).
#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut bad = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        for (n, line) in prose_lines(&text).iter().enumerate() {
            for target in link_targets(line) {
                if let Err(why) = check_link(&file, &target) {
                    bad.push(format!("{}: ({target}) {why}", at(&file, n + 1)));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

fn check_link(file: &str, target: &str) -> Result<(), String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let dest = if path.is_empty() {
        PathBuf::from(file)
    } else {
        let joined = Path::new(file).parent().unwrap().join(path);
        normalize(&joined).ok_or("leaves the repository")?
    };
    if !exists(&dest) {
        return Err("no such file in the repository".into());
    }
    match anchor {
        Some(a) if dest.extension().is_some_and(|e| e == "md") => {
            let slugs = heading_slugs(&read(dest.to_str().unwrap()));
            if slugs.contains(a) {
                Ok(())
            } else {
                Err(format!("no heading with anchor #{a}"))
            }
        }
        _ => Ok(()),
    }
}

/// `a/../b` resolved; `None` when it climbs above the repository root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// The link targets of one line, code spans left out.
fn link_targets(line: &str) -> Vec<String> {
    let prose = outside_code_spans(line);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_string());
        }
    }
    out
}

/// GitHub's anchors of a markdown file's headings: lowercase, punctuation
/// other than `-` and `_` dropped, spaces to `-`, repeats suffixed `-1`, `-2`.
pub fn heading_slugs(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for line in prose_lines(text) {
        let hashes = line.trim_start_matches('#');
        if hashes.len() == line.len() || !hashes.starts_with(' ') {
            continue;
        }
        let title = hashes.trim();
        let base: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut slug = base.clone();
        let mut n = 0;
        while seen.contains(&slug) {
            n += 1;
            slug = format!("{base}-{n}");
        }
        seen.insert(slug);
    }
    seen
}

/// Directories no doc may point into: build output and the bench's results.
const NOT_SOURCES: [&str; 3] = ["target", ".git", "bench-out"];
/// File endings of a code span that names a file of the repository.
const FILE_ENDINGS: [&str; 12] = [
    ".md", ".rs", ".yaml", ".yml", ".sql", ".lua", ".sh", ".json", ".toml", ".service", ".js",
    ".css",
];

/// Every file of the repository, by its path from the root.
fn repository_files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(super::root().join(dir)).unwrap() {
        let entry = entry.unwrap();
        let rel = dir.join(entry.file_name());
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            if !NOT_SOURCES.iter().any(|n| name.starts_with(n)) {
                repository_files(&rel, out);
            }
        } else {
            out.push(rel.to_string_lossy().into_owned());
        }
    }
}

/// A file path in a code span (`src/redis/keys.rs`, `routes/openapi.rs`, a
/// folder-relative one as the text around it gives the folder) names a file
/// of the repository: a path ending its path. URLs (`/openapi.json`), the
/// bench's output (`bench-out/…`) and patterns (`<`, `{`, `*`) are no files.
#[test]
fn every_file_path_the_docs_name_exists() {
    let mut files = Vec::new();
    repository_files(Path::new(""), &mut files);
    let mut bad = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        for (n, line) in prose_lines(&text).iter().enumerate() {
            for span in super::code_spans(line) {
                let path = span.split('#').next().unwrap();
                let is_path = path.contains('/')
                    && FILE_ENDINGS.iter().any(|e| path.ends_with(e))
                    && !path.starts_with('/')
                    && !path.starts_with("bench-out")
                    && !path.contains([' ', '<', '{', '*', '$', ':']);
                if !is_path {
                    continue;
                }
                let inside = path.trim_start_matches("./");
                let found = !inside.starts_with("..")
                    && files
                        .iter()
                        .any(|f| f == inside || f.ends_with(&format!("/{inside}")));
                if !found {
                    bad.push(format!(
                        "{}: `{span}` is no file of the repository",
                        at(&file, n + 1)
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
