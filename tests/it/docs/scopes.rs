//! Contract §6.2's scope table ("Who may call") is the gate's: each client
//! scope lists exactly the routes `auth::access::SCOPED_ROUTES` gives it, so
//! an operator granting a scope knows what the client may call.

use std::collections::{BTreeMap, BTreeSet};

use stockd::roles::api::auth::SCOPED_ROUTES;

use super::{at, code_spans, read, tables};

const CONTRACT: &str = "docs/contract.md";

type Routes = BTreeSet<(String, String)>;

#[test]
fn the_scope_table_is_the_gates() {
    let mut gate: BTreeMap<String, Routes> = BTreeMap::new();
    for (method, path, scope) in SCOPED_ROUTES {
        let name = format!("{scope:?}").to_lowercase();
        gate.entry(name)
            .or_default()
            .insert((method.to_string(), path.to_string()));
    }
    let text = read(CONTRACT);
    let table = tables(&text)
        .into_iter()
        .find(|t| t.first_header_is("scope"))
        .expect("contract §6.2 has a table headed `scope`");
    let mut bad = Vec::new();
    let mut seen = BTreeSet::new();
    for (line, row) in &table.rows {
        let scope = code_spans(&row[0]).concat();
        seen.insert(scope.clone());
        // `admin` is every `/v1/admin/*` route, checked by the routes themselves.
        let Some(want) = gate.get(&scope) else {
            if scope != "admin" {
                bad.push(format!(
                    "{}: the gate has no scope `{scope}`",
                    at(CONTRACT, *line)
                ));
            }
            continue;
        };
        let listed: Routes = code_spans(&row[1])
            .iter()
            .filter_map(|s| s.split_once(' '))
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        let extra: Vec<_> = listed.difference(want).collect();
        let missing: Vec<_> = want.difference(&listed).collect();
        if !extra.is_empty() || !missing.is_empty() {
            bad.push(format!(
                "{}: scope `{scope}`: not the gate's {extra:?}; missing {missing:?}",
                at(CONTRACT, *line)
            ));
        }
    }
    for scope in gate.keys().filter(|s| !seen.contains(*s)) {
        bad.push(format!("{CONTRACT} §6.2: no row for scope `{scope}`"));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
