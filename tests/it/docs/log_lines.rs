//! The log lines the docs quote are lines stockd logs: an operator greps the
//! journal for them. A quoted line is a claim in one of three shapes:
//!
//! - a message, `` `consumer.batch: refused by MySQL` `` or "warmup: loaded
//!   into Redis": a span (or a double-quoted text) `prefix: text` whose prefix's
//!   first word is one stockd's messages start with (docs::log_source). A
//!   YAML setting (`redis.batch_max: 1`: a config key and one word) is none;
//! - a name, `` `consumer.rejected` ``: a dotted span whose first word is one
//!   of the log's dotted names (`consumer`, `outage`, `breaker`, …), unless it
//!   is a key of config/base.yaml or a file name;
//! - any span right after "logs", "logged" or "log line" (nothing between, or a
//!   few words ending in `(` or `:`): "it logs `finished movements their
//!   callers left`", "logged at error (`consumer.rejected`)".
//!
//! A message holds when its text up to the first `…` (a log line's fields
//! follow its message) is part of a string of a tracing macro of src/, or of
//! one piece of it between `{}` holes; a name holds when the source logs it as
//! a message prefix, `event =` value, span name or field name, or sets it as a
//! trace attribute (the docs name those beside the log fields).

use serde_yaml::Value;

use super::log_source::{first_word, is_name, logged, Logged};
use super::{at, outside_code_spans, paragraph_spans, prose_sources, read};

/// Lines of other programs the docs quote after "logs", not stockd's.
const FOREIGN: [&str; 1] = [
    // podman, on a machine without systemd (operations.md, "Containers").
    "unable to get systemd connection",
];
/// Endings of file names (`consumer.rs`, `order.lua`), not log names.
const FILE_ENDINGS: [&str; 7] = [".rs", ".lua", ".yaml", ".sql", ".sh", ".conf", ".md"];
/// Words that make the next span a quoted log line (lowercase only: "Logs:"
/// heads a paragraph, and the noun "log" is also MariaDB's relay log).
const LOG_WORDS: [&str; 3] = ["log line", "logged", "logs"];
/// How far (in characters) a span may follow a log word and still be what it logs.
const NEAR: usize = 30;

/// Whether `key` is a key or section of config/base.yaml.
fn is_config_key(base: &Value, key: &str) -> bool {
    key.split('.')
        .try_fold(base, |v, part| v.as_mapping()?.get(part))
        .is_some()
}

/// What a span claims about the log, if it claims anything.
enum Claim {
    Message(String),
    Name(String),
}

fn claim_of(span: &str, base: &Value, logged: &Logged, after_log_word: bool) -> Option<Claim> {
    let span = span.trim();
    if let Some((prefix, text)) = span.split_once(": ") {
        let setting = is_config_key(base, prefix) && !text.trim().contains(' ');
        if is_name(prefix) && logged.prefixes.contains(&first_word(prefix)) && !setting {
            return Some(Claim::Message(span.to_string()));
        }
    }
    let is_file = FILE_ENDINGS.iter().any(|e| span.ends_with(e));
    if span.contains('.')
        && is_name(span)
        && logged.components.contains(&first_word(span))
        && !is_config_key(base, span)
        && !is_file
    {
        return Some(Claim::Name(span.to_string()));
    }
    if after_log_word && !FOREIGN.contains(&span) {
        return Some(if is_name(span) {
            Claim::Name(span.to_string())
        } else {
            Claim::Message(span.to_string())
        });
    }
    None
}

/// Whether a message text (up to its first `…`) is part of a logged string.
fn is_logged(message: &str, logged: &Logged) -> bool {
    let said = message.split('…').next().unwrap().trim();
    let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
    logged.strings.iter().any(|s| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        s.split('{')
            .enumerate()
            .map(|(i, piece)| {
                if i == 0 {
                    piece
                } else {
                    piece.split_once('}').map_or(piece, |p| p.1)
                }
            })
            .any(|piece| piece.contains(&said))
    })
}

/// The messages src/ logs with the quoted message's prefix, for a failure.
fn same_prefix(message: &str, logged: &Logged) -> String {
    let Some((prefix, _)) = message.split_once(": ") else {
        return String::new();
    };
    let head = format!("{prefix}: ");
    let alike: Vec<&String> = logged
        .strings
        .iter()
        .filter(|s| s.starts_with(&head))
        .collect();
    format!(" (messages it logs starting \"{head}\": {alike:?})")
}

/// Whether the prose `before` a span ends in a log word and at most a few
/// words that introduce what it logs: "logs `…`", "logged at error (`…`",
/// "in the logs: `…`" (the gap empty, or ending in `(` or `:`).
fn follows_log_word(before: &str) -> bool {
    LOG_WORDS.iter().any(|w| {
        before.rfind(w).is_some_and(|i| {
            let gap = &before[i + w.len()..];
            let is_word_end = !gap.starts_with(|c: char| c.is_ascii_alphabetic());
            let trimmed = gap.trim();
            let introduces = trimmed.is_empty() || trimmed.ends_with('(') || trimmed == ":";
            is_word_end
                && introduces
                && gap.chars().count() <= NEAR
                && !gap.contains([',', ';', '.', '`', '|'])
        })
    })
}

/// "word: text" in double quotes outside code spans.
fn quoted_messages(line: &str) -> Vec<String> {
    let prose = outside_code_spans(line);
    prose
        .split('"')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .filter(|s| s.split_once(": ").is_some_and(|(p, _)| is_name(p)))
        .collect()
}

#[test]
fn every_log_line_the_docs_quote_is_logged() {
    let base: Value = serde_yaml::from_str(&read("config/base.yaml")).unwrap();
    let logged = logged();
    assert!(
        logged.strings.len() > 80 && logged.names.contains("consumer.rejected"),
        "the tracing reader found only {} strings: is it broken?",
        logged.strings.len()
    );
    let mut bad = Vec::new();
    let mut claims = 0;
    for (file, text) in prose_sources() {
        let mut found: Vec<(usize, Claim)> = paragraph_spans(&text)
            .into_iter()
            .filter_map(|s| {
                let near = follows_log_word(&s.before);
                Some((s.line, claim_of(&s.text, &base, &logged, near)?))
            })
            .collect();
        for (n, line) in text.lines().enumerate() {
            for quoted in quoted_messages(line) {
                if let Some(claim @ Claim::Message(_)) = claim_of(&quoted, &base, &logged, false) {
                    found.push((n + 1, claim));
                }
            }
        }
        for (line, claim) in found {
            claims += 1;
            match claim {
                Claim::Message(m) if !is_logged(&m, &logged) => bad.push(format!(
                    "{}: quotes the log line \"{}\", which no tracing macro of src/ logs{}",
                    at(&file, line),
                    m.split('…').next().unwrap().trim(),
                    same_prefix(&m, &logged)
                )),
                Claim::Name(n) if !logged.names.contains(&n) => bad.push(format!(
                    "{}: quotes the log name `{n}`, which src/ logs nowhere (names starting `{}.` it logs: {:?})",
                    at(&file, line),
                    first_word(&n),
                    logged
                        .names
                        .iter()
                        .filter(|l| l.starts_with(&format!("{}.", first_word(&n))))
                        .collect::<Vec<_>>()
                )),
                _ => {}
            }
        }
    }
    assert!(
        claims > 15,
        "only {claims} quoted log lines found: is the reader broken?"
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
