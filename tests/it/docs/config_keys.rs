//! The configuration keys the docs name are the keys stockd reads, with the
//! defaults config/base.yaml gives them: the key tables of the README and of
//! contract §9 (key, environment variable, default), and §9's section table.
//! And config/base.yaml holds every key of the settings structs, as its header
//! promises ("every key, with a comment"): loaded alone and written back, the
//! settings have exactly base.yaml's keys.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml::Value;
use stockd::config::Settings;

use super::{all_tables, at, code_spans, read};

const BASE: &str = "config/base.yaml";

/// Dotted key → value of every leaf of a YAML tree (a mapping is no leaf).
fn leaves(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Mapping(m) if !m.is_empty() || prefix.is_empty() => {
            for (k, v) in m {
                let k = k.as_str().unwrap();
                let key = if prefix.is_empty() {
                    k.to_string()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&key, v, out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

fn base() -> (Value, BTreeMap<String, Value>) {
    let tree: Value = serde_yaml::from_str(&read(BASE)).unwrap();
    let mut out = BTreeMap::new();
    leaves("", &tree, &mut out);
    (tree, out)
}

#[test]
fn base_yaml_holds_every_key_of_the_settings_and_no_other() {
    let dir = std::env::temp_dir().join(format!("stockd-docs-base-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("base.yaml"), read(BASE)).unwrap();
    // `local` without local.yaml: base.yaml alone.
    let settings = Settings::load_with_vars(&dir, "local", &[])
        .unwrap_or_else(|e| panic!("{BASE} alone does not load: {e:#}"));
    std::fs::remove_dir_all(&dir).unwrap();
    let mut typed = BTreeMap::new();
    leaves("", &serde_yaml::to_value(&settings).unwrap(), &mut typed);
    let (_, base) = base();
    let missing: Vec<_> = typed.keys().filter(|k| !base.contains_key(*k)).collect();
    // A secret's `…_file` twin is read while the layers merge, then gone.
    let twin_of_a_secret = |k: &str| {
        k.strip_suffix("_file")
            .is_some_and(|s| typed.contains_key(s))
    };
    let unknown: Vec<_> = base
        .keys()
        .filter(|k| !typed.contains_key(*k) && !twin_of_a_secret(k))
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "keys of the settings missing from {BASE}: {missing:?}; keys of {BASE} the settings lack: {unknown:?}"
    );
}

/// `a.{b,c}` → `a.b`, `a.c`.
fn expand(key: &str) -> Vec<String> {
    match (key.find('{'), key.find('}')) {
        (Some(i), Some(j)) => key[i + 1..j]
            .split(',')
            .map(|part| format!("{}{}{}", &key[..i], part.trim(), &key[j + 1..]))
            .collect(),
        _ => vec![key.to_string()],
    }
}

/// `http.bind` → `STOCKD__HTTP__BIND`.
fn env_of(key: &str) -> String {
    format!("STOCKD__{}", key.replace('.', "__").to_uppercase())
}

/// The defaults a cell opens with: code spans and the words null / none /
/// unset / off, separated by `,` or `/`, up to the first other text.
fn leading_defaults(cell: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = cell.trim();
    loop {
        if let Some(r) = rest.strip_prefix('`') {
            let end = r.find('`').unwrap();
            out.push(r[..end].to_string());
            rest = &r[end + 1..];
        } else if let Some(word) = ["null", "none", "unset", "off"]
            .iter()
            .find(|w| rest.starts_with(**w))
        {
            out.push((*word).to_string());
            rest = &rest[word.len()..];
        } else {
            return out;
        }
        match rest.trim_start().strip_prefix(',') {
            Some(r) => rest = r.trim_start(),
            None => return out,
        }
    }
}

/// Whether a documented default is the YAML value.
fn same(doc: &str, v: &Value) -> bool {
    match v {
        Value::Null => ["null", "none", "unset", "off"].contains(&doc),
        Value::Bool(b) => doc == b.to_string() || (doc == "off" && !b),
        Value::Number(n) => doc == n.to_string(),
        Value::String(s) => doc == s,
        Value::Sequence(s) => s.is_empty() && doc == "[]",
        _ => false,
    }
}

/// Every leaf of base.yaml a documented key names (`a.*`: every leaf under `a`).
fn leaves_named<'a>(key: &str, base: &'a BTreeMap<String, Value>) -> Vec<(&'a String, &'a Value)> {
    match key.strip_suffix('*') {
        Some(prefix) => base.iter().filter(|(k, _)| k.starts_with(prefix)).collect(),
        None => base.get_key_value(key).into_iter().collect(),
    }
}

#[test]
fn the_documented_keys_exist_with_their_defaults_and_variables() {
    let (_, base) = base();
    let mut bad = Vec::new();
    let mut rows = 0;
    let key_tables = all_tables().into_iter().filter(|(_, t)| {
        t.header[0].starts_with("key") && t.header.last().is_some_and(|h| h == "default")
    });
    for (file, table) in &key_tables.collect::<Vec<_>>() {
        for (line, row) in &table.rows {
            rows += 1;
            let here = at(file, *line);
            let spans = code_spans(&row[0]);
            let groups: Vec<&String> = spans
                .iter()
                .filter(|s| !s.starts_with("STOCKD__"))
                .collect();
            let keys: Vec<String> = groups.iter().flat_map(|g| expand(g)).collect();
            for key in &keys {
                if leaves_named(key, &base).is_empty() {
                    bad.push(format!("{here}: `{key}` is not a key of {BASE}"));
                }
            }
            let envs = row[..row.len() - 1].iter().flat_map(|c| code_spans(c));
            for env in envs.filter(|s| s.starts_with("STOCKD__") && !s.contains('…')) {
                if !keys.iter().any(|k| env_of(k) == env) {
                    bad.push(format!(
                        "{here}: `{env}` is the variable of none of {keys:?}"
                    ));
                }
            }
            let defaults = leading_defaults(row.last().unwrap());
            let pairs: Vec<(&String, &String)> = match defaults.len() {
                1 => groups.iter().map(|g| (*g, &defaults[0])).collect(),
                n if n == groups.len() => groups.iter().copied().zip(defaults.iter()).collect(),
                _ => {
                    bad.push(format!(
                        "{here}: {} defaults for {} keys",
                        defaults.len(),
                        groups.len()
                    ));
                    continue;
                }
            };
            for (group, doc) in pairs {
                for key in expand(group) {
                    for (k, v) in leaves_named(&key, &base) {
                        if !same(doc, v) {
                            bad.push(format!(
                                "{here}: `{k}` defaults to {v:?} in {BASE}, the table says `{doc}`"
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(rows > 0, "no key table found");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Contract §9's section table has a row for every top-level section.
#[test]
fn the_section_table_names_every_section() {
    let (tree, _) = base();
    let sections: BTreeSet<String> = tree
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .collect();
    let (file, table) = all_tables()
        .into_iter()
        .find(|(_, t)| t.first_header_is("section"))
        .expect("contract §9 has a table headed `section`");
    let rows: BTreeSet<String> = table
        .rows
        .iter()
        .map(|(_, r)| code_spans(&r[0]).concat())
        .collect();
    assert_eq!(
        rows, sections,
        "{file}:{}: the sections of {BASE}",
        table.line
    );
}
