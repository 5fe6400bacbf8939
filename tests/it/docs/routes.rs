//! Contract §6.1's route table is the router and the OpenAPI document the api
//! serves (`GET /openapi.json`, generated from the handlers): one row for every
//! route the router registers (src/roles/api/routes/mod.rs, `resource(path,
//! methods)`), none for a route it lacks; and the statuses a row names are the
//! statuses the OpenAPI operation documents (and the reverse, but for those
//! §6.1 says any route may answer: 401, 403, 429, 503, and the 400/404/405/415
//! every route shares). The console's page and assets are routed but are no
//! API, so the document leaves them out.
//!
//! And every `METHOD /path` the docs name anywhere is a route (a runbook once
//! sent operators to `POST /v1/reservations`, which never existed).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{at, code_spans, read, tables};

const CONTRACT: &str = "docs/contract.md";
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "DELETE", "PATCH"];
/// Statuses §6.1's preamble (or the router, for any route) gives every route.
const SHARED: [u16; 8] = [400, 401, 403, 404, 405, 415, 429, 503];

type Operations = BTreeMap<(String, String), BTreeSet<u16>>;

/// (method, path) → documented statuses, from the served document.
fn served() -> Operations {
    let doc: Value = serde_json::from_str(stockd::roles::api::routes::openapi::document()).unwrap();
    let mut out = Operations::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let statuses = op["responses"]
                .as_object()
                .map(|r| r.keys().filter_map(|k| k.parse().ok()).collect())
                .unwrap_or_default();
            out.insert((method.to_uppercase(), path.clone()), statuses);
        }
    }
    out
}

const ROUTER: &str = "src/roles/api/routes/mod.rs";

/// (method, path) of every `resource("path", "GET, POST")` of the router.
fn routed() -> BTreeSet<(String, String)> {
    let text = read(ROUTER);
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("resource(") {
        let args: Vec<&str> = text[i..].split('"').collect();
        // resource( "path" , "methods" ): the 2nd and 4th pieces.
        if args.len() > 4 && args[2].trim() == "," {
            for method in args[3].split(',') {
                out.insert((method.trim().to_string(), args[1].to_string()));
            }
        }
    }
    out
}

/// The routes of one first cell: `GET /a`, `/b` (same method), `/cancel`
/// (the previous path with its last segment replaced).
fn routes_of(cell: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut method = String::new();
    for span in code_spans(cell) {
        let span = span.replace('…', "");
        let path = match span.split_once(' ') {
            Some((m, p)) if METHODS.contains(&m) => {
                method = m.to_string();
                p.to_string()
            }
            _ => span.clone(),
        };
        let path = path.split(['[', '?']).next().unwrap().to_string();
        let path = match out.last() {
            Some((_, prev)) if path.matches('/').count() == 1 && prev.matches('/').count() >= 3 => {
                format!("{}{path}", &prev[..prev.rfind('/').unwrap()])
            }
            _ => path,
        };
        out.push((method.clone(), path));
    }
    out
}

/// The HTTP statuses a cell names (200–599 as whole words).
fn statuses(cell: &str) -> BTreeSet<u16> {
    cell.split(|c: char| !c.is_ascii_digit())
        .filter(|w| w.len() == 3)
        .filter_map(|w| w.parse().ok())
        .filter(|s| (200..600).contains(s))
        .collect()
}

#[test]
fn the_route_table_is_the_served_openapi_document() {
    let served = served();
    let routed = routed();
    assert!(
        routed.len() > 20,
        "{ROUTER}: only {} routes read",
        routed.len()
    );
    let text = read(CONTRACT);
    let table = tables(&text)
        .into_iter()
        .find(|t| t.first_header_is("method, path"))
        .expect("contract §6.1 has a table headed `method, path`");
    let mut bad = Vec::new();
    let mut seen = BTreeSet::new();
    for (line, cells) in &table.rows {
        let named: BTreeSet<u16> = statuses(&cells[2])
            .union(&statuses(&cells[3]))
            .copied()
            .collect();
        for route in routes_of(&cells[0]) {
            if !routed.contains(&route) {
                bad.push(format!(
                    "{}: {} {} is not routed",
                    at(CONTRACT, *line),
                    route.0,
                    route.1
                ));
                continue;
            }
            seen.insert(route.clone());
            let Some(documented) = served.get(&route) else {
                continue;
            };
            let extra: Vec<_> = named.difference(documented).collect();
            let missing: Vec<_> = documented
                .difference(&named)
                .filter(|s| !SHARED.contains(s))
                .collect();
            if !extra.is_empty() || !missing.is_empty() {
                bad.push(format!(
                    "{}: {} {}: the OpenAPI document lacks {extra:?}, the row lacks {missing:?}",
                    at(CONTRACT, *line),
                    route.0,
                    route.1
                ));
            }
        }
    }
    for (method, path) in served.keys().chain(&routed).filter(|r| !seen.contains(*r)) {
        bad.push(format!("{CONTRACT} §6.1: no row for {method} {path}"));
    }
    bad.dedup();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Every `METHOD /path` the docs name in a code span, in tables and prose
/// (the README's admin routes, the console's buttons, the runbooks' steps),
/// is a route of the router.
#[test]
fn every_route_the_docs_name_is_routed() {
    let routed = routed();
    let mut bad = Vec::new();
    for file in super::markdown_files() {
        let text = read(&file);
        for (n, line) in super::prose_lines(&text).iter().enumerate() {
            for span in code_spans(line) {
                let Some((method, path)) = span.split_once(' ') else {
                    continue;
                };
                // `POST …/{request_id}/confirm`, `GET /v1/skus/...`: shorthand.
                let shorthand = path.contains('…') || path.contains("...");
                if !METHODS.contains(&method) || !path.starts_with('/') || shorthand {
                    continue;
                }
                let path = path.split(['[', '?', ' ']).next().unwrap();
                if !routed.contains(&(method.to_string(), path.to_string())) {
                    bad.push(format!(
                        "{}: {method} {path} is not routed",
                        at(&file, n + 1)
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
