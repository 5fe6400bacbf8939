//! The reference tables of the docs checked against the code (issue 53, item 2),
//! so a table cannot drift from what it describes: each file below compares one
//! kind of table with its source of truth and fails naming the row and file.
//! They read the repository and the library's own values and take milliseconds;
//! one (`metrics_scrape`) also drives a small run and reads `/metrics`.
//!
//! This file holds what they share: the repository's markdown files and a small
//! reader of GitHub-flavoured tables and code spans.

mod alerts;
mod benchmarks;
mod cli;
mod config_envs;
mod config_keys;
mod config_mentions;
mod events;
mod log_lines;
mod log_source;
mod markdown;
mod metric_labels;
mod metrics;
mod metrics_scrape;
mod metrics_source;
mod problem_codes;
mod queues;
mod redis_keys;
mod routes;
mod schema;
mod scopes;
mod section_refs;

use std::path::{Path, PathBuf};

/// The repository root (the crate's manifest directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the repository, by its path from the root.
pub fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The markdown files a reader is sent to: the README, BENCHMARKS.md and docs/.
pub fn markdown_files() -> Vec<String> {
    let mut files = vec!["README.md".to_string(), "BENCHMARKS.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// One markdown table: where it starts, its header cells and its rows.
pub struct Table {
    /// 1-based line of the header row (what a failure names).
    pub line: usize,
    pub header: Vec<String>,
    /// Each body row with its 1-based line.
    pub rows: Vec<(usize, Vec<String>)>,
}

impl Table {
    /// Whether the first header cell is `first` (how a check finds its tables).
    pub fn first_header_is(&self, first: &str) -> bool {
        self.header.first().map(String::as_str) == Some(first)
    }
}

/// Every table of a markdown text, outside fenced code blocks. A table is a
/// header row, a delimiter row and the rows up to the first line not starting
/// with `|`.
pub fn tables(text: &str) -> Vec<Table> {
    let lines: Vec<&str> = prose_lines(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let is_delim = lines[i + 1].starts_with("|-") || lines[i + 1].starts_with("| -");
        if lines[i].starts_with('|') && is_delim {
            let mut table = Table {
                line: i + 1,
                header: cells(lines[i]),
                rows: Vec::new(),
            };
            let mut j = i + 2;
            while j < lines.len() && lines[j].starts_with('|') {
                table.rows.push((j + 1, cells(lines[j])));
                j += 1;
            }
            out.push(table);
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// The lines of a markdown text with fenced code blocks blanked (line numbers kept).
pub fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return "";
            }
            if fenced {
                ""
            } else {
                l
            }
        })
        .collect()
}

/// The cells of a table row as GitHub splits them: on every `|` not escaped
/// as `\|` (also inside code spans), `\|` kept as `|`.
pub fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => out.push(String::new()),
            _ => out.last_mut().unwrap().push(c),
        }
    }
    out.into_iter().map(|c| c.trim().to_string()).collect()
}

/// The code spans (`like this`) of a text, in order.
pub fn code_spans(text: &str) -> Vec<String> {
    text.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

/// A line's prose: the pieces between its code spans, joined by spaces.
pub fn outside_code_spans(line: &str) -> String {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every table of every markdown file, with the file's path.
pub fn all_tables() -> Vec<(String, Table)> {
    markdown_files()
        .into_iter()
        .flat_map(|f| {
            let text = read(&f);
            tables(&text).into_iter().map(move |t| (f.clone(), t))
        })
        .collect()
}

/// `path:line` for a failure message.
pub fn at(file: &str, line: usize) -> String {
    format!("{file}:{line}")
}

/// Whether `path` (relative to the root) exists.
pub fn exists(rel: &Path) -> bool {
    root().join(rel).exists()
}

/// The files of a source directory (relative to the root), recursively, as
/// (path from the root, text), in a stable order.
pub fn source_files(rel: &str) -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(&root().join(rel), &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let rel = p
                .strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, text)
        })
        .collect()
}

/// What the docs claim in prose, as (file, text with line numbers kept): the
/// markdown files with fenced blocks blanked, and config/base.yaml's comments
/// (other lines blanked, `#` dropped). docs/benchmarks-history.md is left out:
/// it tells what earlier runs saw, not what the code does today.
pub fn prose_sources() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = markdown_files()
        .into_iter()
        .filter(|f| f != "docs/benchmarks-history.md")
        .map(|f| {
            let text = prose_lines(&read(&f)).join("\n");
            (f, text)
        })
        .collect();
    let yaml = read("config/base.yaml")
        .lines()
        .map(|l| match l.trim_start().strip_prefix('#') {
            Some(comment) => comment.trim(),
            None => "",
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.push(("config/base.yaml".to_string(), yaml));
    out
}

/// A code span of prose: the 1-based line it starts on, its text, and the
/// prose between the span before it (or its paragraph's start) and it.
pub struct Span {
    pub line: usize,
    pub text: String,
    pub before: String,
}

/// The code spans of a prose text. A span may run over a line break inside
/// its paragraph (the break read as a space), as markdown renders it; a blank
/// line ends a paragraph and any open span.
pub fn paragraph_spans(text: &str) -> Vec<Span> {
    let mut out = Vec::new();
    let mut open: Option<Span> = None;
    let mut prose = String::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            open = None;
            prose.clear();
            continue;
        }
        // The pieces between backticks alternate prose and span; a span still
        // open from the line before takes this line's first piece.
        let mut pieces = line.split('`');
        let first = pieces.next().unwrap();
        match open.as_mut() {
            Some(span) => {
                span.text.push(' ');
                span.text.push_str(first.trim_start());
            }
            None => {
                prose.push(' ');
                prose.push_str(first);
            }
        }
        for piece in pieces {
            match open.take() {
                Some(done) => {
                    out.push(done);
                    prose = piece.to_string();
                }
                None => {
                    open = Some(Span {
                        line: n + 1,
                        text: piece.to_string(),
                        before: std::mem::take(&mut prose),
                    })
                }
            }
        }
    }
    out
}
