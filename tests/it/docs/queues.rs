//! The "Topology" section of docs/architecture.md (its drawing and queue
//! table) names exactly the exchanges and queues stockd declares: the names
//! come from `mq::topology::Topology`, built with the prefix `<p>` and the
//! delay levels `<T>` (`reservation.ttl_secs`) and `<E>`
//! (`reservation.extend_secs`), as the section writes them.

use std::collections::BTreeSet;

use stockd::config::Settings;
use stockd::mq::topology::Topology;

use super::{read, root};

const ARCHITECTURE: &str = "docs/architecture.md";
const SECTION: &str = "### Topology";
/// Delay levels the doc writes as `<T>` and `<E>`: values no default has.
const TTL_SECS: u64 = 7001;
const EXTEND_SECS: u64 = 7002;

/// Every exchange and queue name, as the doc spells them.
fn declared() -> BTreeSet<String> {
    let mut settings = Settings::load_with_vars(&root().join("config"), "test", &[]).unwrap();
    settings.amqp.queue_prefix = "<p>".into();
    settings.reservation.ttl_secs = TTL_SECS;
    settings.reservation.extend_secs = EXTEND_SECS;
    let topology = Topology::new(&settings.amqp, &settings.reservation);
    // Debug lists every field: a queue added to the struct is seen here.
    let text = format!("{topology:?}")
        .replace(&TTL_SECS.to_string(), "<T>")
        .replace(&EXTEND_SECS.to_string(), "<E>");
    names_in(&text)
}

/// The `<p>…` names of a text.
fn names_in(text: &str) -> BTreeSet<String> {
    text.match_indices("<p>")
        .map(|(i, _)| {
            let rest = &text[i + 3..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "._<>".contains(c)))
                .unwrap_or(rest.len());
            format!("<p>{}", &rest[..end])
        })
        // `<p>` alone is the prefix being explained, no name.
        .filter(|name| name != "<p>")
        .collect()
}

#[test]
fn the_topology_section_names_every_exchange_and_queue() {
    let text = read(ARCHITECTURE);
    let start = text
        .find(SECTION)
        .expect("architecture.md has a Topology section");
    let body = &text[start + SECTION.len()..];
    let section = &body[..body.find("\n#").unwrap_or(body.len())];
    let documented = names_in(section);
    let declared = declared();
    let unknown: Vec<_> = documented.difference(&declared).collect();
    let missing: Vec<_> = declared.difference(&documented).collect();
    assert!(
        unknown.is_empty() && missing.is_empty(),
        "{ARCHITECTURE} \"Topology\": names stockd does not declare: {unknown:?}; declared but not named: {missing:?}"
    );
}

/// `expiry.delay.<T>s`, `.<new>s`, `.<reservation.extend_secs>s`: one pattern.
fn delay_level_as_one(name: &str) -> String {
    match name.split_once("expiry.delay.<") {
        Some((head, _)) => format!("{head}expiry.delay.<level>s"),
        None => name.to_string(),
    }
}

/// Everywhere else the docs write a broker name as `<prefix>name` or
/// `<amqp.queue_prefix>name`: each is a name stockd declares (or, `<prefix>`
/// being also the Redis prefix in places, an unhashed Redis key: `skus`).
#[test]
fn every_prefixed_broker_name_in_the_docs_is_declared() {
    let declared: BTreeSet<String> = declared()
        .iter()
        .map(|n| delay_level_as_one(n.trim_start_matches("<p>")))
        .collect();
    let redis: BTreeSet<String> = super::redis_keys::built()
        .into_iter()
        .filter(|(tag, _)| tag.is_empty())
        .map(|(_, suffix)| suffix)
        .collect();
    let mut bad = Vec::new();
    for file in super::markdown_files() {
        let text = read(&file);
        for (n, line) in text.lines().enumerate() {
            for prefix in ["<prefix>", "<amqp.queue_prefix>"] {
                for (i, _) in line.match_indices(prefix) {
                    let rest = &line[i + prefix.len()..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || "._<>".contains(c)))
                        .unwrap_or(rest.len());
                    let name = delay_level_as_one(rest[..end].trim_end_matches('.'));
                    if !declared.contains(&name) && !redis.contains(&name) {
                        bad.push(format!(
                            "{}: `{prefix}{name}` is declared nowhere",
                            super::at(&file, n + 1)
                        ));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
