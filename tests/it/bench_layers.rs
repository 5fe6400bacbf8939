//! The load generator's folders import in one direction only (the issue: data
//! types beside renderers made a six-file circle). Read from the sources, so a
//! new `use` that points up fails here before it tangles the folders again.

use std::collections::BTreeMap;

use std::path::PathBuf;

use crate::helpers::sources::{code_of, names_after, sources};

/// `src/` of the load generator's crate (bench/, a workspace member).
fn bench_src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench/src")
}

/// Each folder of `bench/src/` and the folders it may import. `suite` and the
/// files directly in `bench/src/` (the entry points) sit above all of them.
const MAY_IMPORT: &[(&str, &[&str])] = &[
    ("results", &[]),
    ("measure", &["results"]),
    ("drive", &["measure", "results"]),
    ("stack", &["drive", "measure", "results"]),
    ("phases", &["stack", "drive", "measure", "results"]),
    ("report", &["results"]),
];

/// Which `bench/src/` folders a source text names through `crate::`.
fn folders_named(text: &str, folders: &[&str]) -> Vec<String> {
    names_after(text, "crate::")
        .into_iter()
        .filter(|name| folders.contains(name))
        .map(str::to_owned)
        .collect()
}

/// No file of a `bench/src/` folder imports a folder above it (nor `report`
/// anything but `results`), and a folder's `mod.rs` reaches its neighbours
/// through `crate::`, not `super::`, so the rule sees every edge.
#[test]
fn the_bench_folders_import_downwards_only() {
    let root = bench_src();
    let rules: BTreeMap<&str, &[&str]> = MAY_IMPORT.iter().copied().collect();
    let mut folders: Vec<&str> = rules.keys().copied().collect();
    folders.extend(["suite"]);
    let mut wrong = Vec::new();
    for (folder, allowed) in &rules {
        let mut files = Vec::new();
        sources(&root.join(folder), &mut files);
        assert!(
            !files.is_empty(),
            "bench/src/{folder}/ is gone: update MAY_IMPORT"
        );
        for file in files {
            let text = code_of(&std::fs::read_to_string(&file).unwrap());
            for named in folders_named(&text, &folders) {
                if named != *folder && !allowed.contains(&named.as_str()) {
                    wrong.push(format!("{} imports {named}", file.display()));
                }
            }
            let is_mod = file.file_name().is_some_and(|n| n == "mod.rs");
            for other in &folders {
                if is_mod && text.contains(&format!("super::{other}::")) {
                    wrong.push(format!("{} names super::{other}", file.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layering: {wrong:#?}");
}

/// No two files under `bench/src/` share a name (there were three `hot_sku.rs`).
#[test]
fn no_two_bench_files_share_a_name() {
    let root = bench_src();
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if name != "mod.rs" {
            seen.entry(name)
                .or_default()
                .push(file.display().to_string());
        }
    }
    seen.retain(|_, paths| paths.len() > 1);
    assert!(seen.is_empty(), "files named alike: {seen:#?}");
}
