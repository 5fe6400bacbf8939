//! docs/architecture.md's key layout table names every Redis key stockd
//! builds, and no other. Keys are built in one place, src/redis/keys.rs: each
//! builder is read there as (hash tag, suffix): `sku` (a SKU's, a bucket's
//! or a buyer's tag), `oi` (an order shard's tag) or none, and its last
//! literal (`res:` for `res:<request_id>`).

use std::collections::BTreeSet;

use super::{code_spans, read, tables};

const ARCHITECTURE: &str = "docs/architecture.md";
const KEYS_RS: &str = "src/redis/keys.rs";
/// Helpers of keys.rs that build no key of their own.
const NOT_BUILDERS: [&str; 8] = [
    "new",
    "prefix",
    "key",
    "tagged",
    "at",
    "of_buyer",
    "of_order_shard",
    "of",
];

type Shape = (&'static str, String);

/// The shapes keys.rs builds, from its builder functions (tests left out).
pub(super) fn built() -> BTreeSet<Shape> {
    let text = read(KEYS_RS);
    let code = &text[..text.find("#[cfg(test)]").unwrap_or(text.len())];
    let mut out = BTreeSet::new();
    for chunk in code.split("fn ").skip(1) {
        let name = chunk.split('(').next().unwrap();
        if NOT_BUILDERS.contains(&name) {
            continue;
        }
        let body = &chunk[..chunk.find("\n    }").unwrap_or(chunk.len())];
        let Some(literal) = body.rsplit('"').nth(1) else {
            continue;
        };
        let suffix = literal.trim_start_matches("{}");
        let suffix = suffix.split('{').next().unwrap().to_string();
        // A buyer's tag (`u<user_id>`) is shaped as a SKU's, as `shape` does.
        let tag = if body.contains("self.of_order_shard(") {
            "oi"
        } else if ["self.at(", "self.tagged(", "self.of_buyer("]
            .iter()
            .any(|call| body.contains(call))
        {
            "sku"
        } else if body.contains("self.prefix") {
            ""
        } else {
            continue;
        };
        out.insert((tag, suffix));
    }
    out
}

/// `<p>{<sku>}:res:<request_id>` → ("sku", "res:"); `<p>{oi:<n>}:order:<id>`
/// → ("oi", "order:"); `<p>skus` → ("", "skus").
fn shape(key: &str) -> Option<Shape> {
    let rest = key.strip_prefix("<p>")?;
    let (tag, rest) = match rest.strip_prefix('{') {
        Some(r) => {
            let (tag, after) = r.split_once("}:")?;
            (if tag.starts_with("oi:") { "oi" } else { "sku" }, after)
        }
        None => ("", rest),
    };
    Some((tag, rest.split('<').next().unwrap().to_string()))
}

#[test]
fn the_key_table_names_every_key_keys_rs_builds() {
    let text = read(ARCHITECTURE);
    let table = tables(&text)
        .into_iter()
        .find(|t| t.first_header_is("key") && t.header.get(1).map(String::as_str) == Some("type"))
        .expect("architecture.md has a key layout table (key | type | holds)");
    let documented: BTreeSet<Shape> = table
        .rows
        .iter()
        .flat_map(|(_, row)| code_spans(&row[0]))
        .filter_map(|k| shape(&k))
        .collect();
    let built = built();
    let unknown: Vec<_> = documented.difference(&built).collect();
    let missing: Vec<_> = built.difference(&documented).collect();
    assert!(
        unknown.is_empty() && missing.is_empty(),
        "{ARCHITECTURE}:{} key layout, as (tag, suffix): keys {KEYS_RS} does not build: {unknown:?}; keys it builds without a row: {missing:?}",
        table.line
    );
}
