//! The crate's own source files read as text, for the tests that hold the
//! module layering (`crate_layers`, `bench_layers`) and keep each driver in
//! its adapter (`driver_fence`): a new `use` that points up, or a driver
//! named outside its adapter, fails there before it tangles the modules.

use std::path::{Path, PathBuf};

/// `src/` of this checkout, or a folder under it.
pub fn src_dir(under: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(under)
}

/// The code of a source file: comment lines dropped, since a doc link to a
/// module above (`[`crate::roles`]`) is no import.
pub fn code_of(text: &str) -> String {
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `.rs` file under `dir`, recursively.
pub fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The names that follow `prefix` in `text` (`crate::` → `redis`, `ops`, …).
pub fn names_after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.match_indices(prefix)
        .map(|(at, needle)| &text[at + needle.len()..])
        .filter_map(|rest| {
            rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
        })
        .filter(|name| !name.is_empty())
        .collect()
}
