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
    ("config_check", 4),
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
