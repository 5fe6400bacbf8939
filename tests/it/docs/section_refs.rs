//! The code, the configuration and the docs cite sections of the markdown
//! files by name (`docs/benchmarks-history.md, "CPU efficiency"`), in comments
//! and prose where no link can stand. Each citation must name a heading of
//! the file it names (one starting with the cited words): a section that moves
//! to another file, or is renamed, leaves no citation pointing at nothing.

use std::path::Path;

use super::{prose_lines, read, root};

/// Where citations are looked for: the folders of the repository's own text,
/// and its top-level files.
const DIRS: [&str; 7] = [
    "src", "bench", "config", "scripts", "deploy", "docs", "tests",
];
const TOP_FILES: [&str; 5] = [
    "README.md",
    "BENCHMARKS.md",
    "Cargo.toml",
    "Makefile",
    "Dockerfile",
];
/// Endings of the files read under `DIRS` (docs/bench holds generated data).
const TEXT_ENDINGS: [&str; 8] = [".rs", ".md", ".yaml", ".yml", ".sh", ".py", ".toml", ".lua"];

/// Every text file of the repository a citation may stand in, from the root.
fn cited_from() -> Vec<String> {
    let mut out: Vec<String> = TOP_FILES.iter().map(|f| f.to_string()).collect();
    for dir in DIRS {
        walk(&root().join(dir), &mut out);
    }
    out.retain(|f| !f.starts_with("docs/bench/") && !f.starts_with("tests/it/docs/"));
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else {
            let rel = path.strip_prefix(root()).unwrap().to_string_lossy();
            let rel = rel.replace('\\', "/");
            if TEXT_ENDINGS.iter().any(|e| rel.ends_with(e)) {
                out.push(rel);
            }
        }
    }
}

/// (byte offset, cited file, cited section) of every `<file>.md, "Section"`
/// (also `<file>.md "Section"`, `<file>.md ("Section"`, and the section on the
/// next comment line). `"…" in [a linked section]` names a passage inside that
/// section, not a heading, and is left out.
pub fn citations(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices(".md") {
        let start = text[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c)))
            .map_or(0, |i| i + 1);
        let file = &text[start..at + 3];
        let rest = text[at + 3..].trim_start_matches([',', ':']);
        let rest = rest.trim_start_matches([' ', '\t']);
        let rest = match rest.strip_prefix('\n') {
            Some(next) => next.trim_start().trim_start_matches(['/', '!', '#']),
            None => rest,
        };
        let rest = rest.trim_start().trim_start_matches('(');
        let Some(quoted) = rest.strip_prefix('"') else {
            continue;
        };
        let Some(end) = quoted.find(['"', '\n']) else {
            continue;
        };
        let after = &quoted[end..];
        if !after.starts_with('"') || after[1..].starts_with(" in [") {
            continue;
        }
        out.push((at, file.to_string(), quoted[..end].to_string()));
    }
    out
}

/// The headings of a markdown text, without their `#`s.
fn headings(text: &str) -> Vec<String> {
    prose_lines(text)
        .into_iter()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim().to_string())
        .collect()
}

/// The cited file: from the root, beside the citing file, or under docs/.
fn resolve(citing: &str, cited: &str) -> Option<String> {
    let beside = Path::new(citing).parent().unwrap().join(cited);
    let beside = beside.to_string_lossy().into_owned();
    [cited.to_string(), beside, format!("docs/{cited}")]
        .into_iter()
        .find(|c| root().join(c).is_file())
}

#[test]
fn every_cited_section_is_a_heading_of_the_file_cited() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for file in cited_from() {
        let text = read(&file);
        for (at, cited, section) in citations(&text) {
            let line = text[..at].lines().count().max(1);
            let Some(path) = resolve(&file, &cited) else {
                bad.push(format!("{file}:{line}: {cited} is no file"));
                continue;
            };
            checked += 1;
            let found = headings(&read(&path))
                .iter()
                .any(|h| h.starts_with(&section) || h.starts_with(&format!("`{section}")));
            if !found {
                bad.push(format!(
                    "{file}:{line}: {path} has no section \"{section}\""
                ));
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} citations found: is the reader broken?"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_citation_is_read_across_a_comment_line() {
    let one = citations("x (BENCHMARKS.md, \"Orders\") y");
    assert_eq!(one, vec![(13, "BENCHMARKS.md".into(), "Orders".into())]);
    let two = citations("/// per order (docs/a.md,\n/// \"Orders\").");
    assert_eq!(two[0].1, "docs/a.md");
    assert_eq!(two[0].2, "Orders");
    assert!(citations("a.md, \"What\" in [Deployment](a.md#d)").is_empty());
    assert!(citations("vec![\"README.md\".to_string()]").is_empty());
}
