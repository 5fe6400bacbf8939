//! The crate's top-level modules import downwards only (docs/architecture.md,
//! "Modules and the direction of dependencies"). Each module has a floor; a file
//! may name, through `crate::`, only modules on a lower floor — so no two
//! modules of one floor (the adapters `redis`, `mq`, `db`) see each other, no
//! module reaches up (`telemetry` into the stores, `ops` into `roles`), and no
//! loop can form. Read from the sources: a new `use` that points up fails here.
//!
//! Which crates and strings each adapter keeps to itself (the drivers, SQL,
//! the OpenAPI derives) is the other half: `driver_fence.rs`.

use std::collections::BTreeMap;

use crate::helpers::sources::{code_of, names_after, sources, src_dir};

/// Every top-level module of `src/` and its floor, as the module map of
/// `src/lib.rs` (its one home) gives them: lines `//! - [`name`] (floor N): …`
/// (0 is the ground).
fn floors() -> Vec<(String, u8)> {
    let lib = std::fs::read_to_string(src_dir("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|line| line.strip_prefix("//! - [`"))
        .map(|rest| {
            let (name, rest) = rest.split_once("`]").expect("a module link");
            let floor = rest
                .trim_start()
                .strip_prefix("(floor ")
                .and_then(|r| r.split(')').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("lib.rs map: `{name}` has no (floor N)"));
            (name.to_string(), floor)
        })
        .collect()
}

/// The top-level module a file under `src/` belongs to (`None`: lib.rs, main.rs).
fn module_of(file: &std::path::Path) -> Option<String> {
    let rel = file.strip_prefix(src_dir("")).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main").then_some(name)
}

#[test]
fn the_top_level_modules_import_downwards_only() {
    let listed = floors();
    let floors: BTreeMap<&str, u8> = listed.iter().map(|(m, f)| (m.as_str(), *f)).collect();
    let mut files = Vec::new();
    sources(&src_dir(""), &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let Some(module) = module_of(&file) else {
            continue;
        };
        let Some(&floor) = floors.get(module.as_str()) else {
            wrong.push(format!(
                "src/{module} has no floor: add it to the module map of src/lib.rs"
            ));
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

/// The map names every module `lib.rs` declares, once, and nothing else.
#[test]
fn every_module_has_a_floor() {
    let lib = std::fs::read_to_string(src_dir("lib.rs")).unwrap();
    let mut declared: Vec<&str> = names_after(&lib, "pub mod ").into_iter().collect();
    let map = floors();
    let mut listed: Vec<&str> = map.iter().map(|(name, _)| name.as_str()).collect();
    declared.sort_unstable();
    listed.sort_unstable();
    assert_eq!(declared, listed);
}
