//! The key tables also say what the environment files change: "`0.0.0.0:8080`
//! in `production.yaml`", "`false` in `local.yaml` and `test.yaml`", "`2` /
//! `5` in `production.yaml`" for a row of two keys. Each such claim must be
//! the value that environment loads (its file, else base.yaml): an operator
//! deploying with `STOCKD_ENV=production` reads these to know what changes.

use serde_yaml::Value;

use super::{all_tables, at, code_spans, read};

/// A code span of a cell: its text and where it starts and ends.
struct Span {
    text: String,
    start: usize,
    end: usize,
}

fn spans(cell: &str) -> Vec<Span> {
    let ticks: Vec<usize> = cell.match_indices('`').map(|(i, _)| i).collect();
    ticks
        .chunks_exact(2)
        .map(|p| Span {
            text: cell[p[0] + 1..p[1]].to_string(),
            start: p[0],
            end: p[1] + 1,
        })
        .collect()
}

/// (values, environment files) of every "`v` [/ `w`] in `f.yaml` [and `g.yaml`]".
fn claims(cell: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let spans = spans(cell);
    let between = |a: &Span, b: &Span| &cell[a.end..b.start];
    let mut out = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        let opens = i > 0 && between(&spans[i - 1], s).ends_with(" in ");
        if !s.text.ends_with(".yaml") || !opens || spans[i - 1].text.ends_with(".yaml") {
            continue;
        }
        let mut files = vec![s.text.clone()];
        for pair in spans[i..].windows(2) {
            if between(&pair[0], &pair[1]) != " and " || !pair[1].text.ends_with(".yaml") {
                break;
            }
            files.push(pair[1].text.clone());
        }
        let mut values = vec![spans[i - 1].text.clone()];
        let mut j = i - 1;
        while j > 0 && between(&spans[j - 1], &spans[j]) == " / " {
            values.insert(0, spans[j - 1].text.clone());
            j -= 1;
        }
        out.push((values, files));
    }
    out
}

/// The value an environment loads for a dotted key: its file's, else base.yaml's.
fn loaded(file: &str, key: &str) -> Option<Value> {
    let get = |tree: &Value| -> Option<Value> {
        key.split('.')
            .try_fold(tree, |v, part| v.as_mapping()?.get(part))
            .cloned()
    };
    let env: Value = serde_yaml::from_str(&read(&format!("config/{file}"))).unwrap();
    get(&env).or_else(|| get(&serde_yaml::from_str(&read("config/base.yaml")).unwrap()))
}

fn rendered(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_yaml::to_string(other).unwrap().trim().to_string(),
    }
}

#[test]
fn what_the_key_tables_say_an_environment_sets_it_sets() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for (file, table) in all_tables() {
        let is_key_table = table.header[0].starts_with("key")
            && table.header.last().is_some_and(|h| h == "default");
        if !is_key_table {
            continue;
        }
        for (line, row) in &table.rows {
            let keys: Vec<String> = code_spans(&row[0])
                .into_iter()
                .filter(|s| !s.starts_with("STOCKD__"))
                .collect();
            for (values, envs) in claims(row.last().unwrap()) {
                let pairs: Vec<(&String, &String)> = match values.len() {
                    1 => keys.iter().map(|k| (k, &values[0])).collect(),
                    n if n == keys.len() => keys.iter().zip(values.iter()).collect(),
                    _ => {
                        bad.push(format!(
                            "{}: {values:?} for keys {keys:?}",
                            at(&file, *line)
                        ));
                        continue;
                    }
                };
                for env in &envs {
                    for (key, said) in &pairs {
                        checked += 1;
                        let got = loaded(env, key).map(|v| rendered(&v));
                        if got.as_deref() != Some(said.as_str()) {
                            bad.push(format!(
                                "{}: `{key}` is `{said}` in `{env}`, says the table; it loads {got:?}",
                                at(&file, *line)
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 10, "only {checked} environment claims found");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
