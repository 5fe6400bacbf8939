//! What stockd logs, read from the source: every `tracing::…!(` macro of src/
//! (events and spans), its string literals (messages, `target:` and `event =`
//! values, span names) and its field names (`sku.id = …`). docs::log_lines
//! compares the log lines the docs quote with this; reading the source keeps
//! the check fast and covers lines a test run would rarely reach.

use std::collections::BTreeSet;

use super::source_files;

/// The log vocabulary of src/.
pub struct Logged {
    /// Every string literal of a tracing macro, escapes and `\`-newline
    /// continuations resolved (a message split over lines is one string).
    pub strings: Vec<String>,
    /// Names a doc may quote on their own: message prefixes (`consumer.rejected`
    /// of "consumer.rejected: …"), literals without a space (`event =` values,
    /// span names, targets), field names, and the trace attributes stockd
    /// sets (`KeyValue::new("http.route", …)`), which share the fields' names.
    pub names: BTreeSet<String>,
    /// First words of the dotted names (`consumer` of `consumer.rejected`):
    /// a dotted code span starting with one is read as a log name.
    pub components: BTreeSet<String>,
    /// First words of every message prefix (`warmup` of "warmup: …"): a
    /// quoted "word: text" starting with one is read as a log message.
    pub prefixes: BTreeSet<String>,
}

/// Reads every tracing macro of src/.
pub fn logged() -> Logged {
    let mut strings = Vec::new();
    let mut fields = BTreeSet::new();
    for (_, text) in source_files("src") {
        for (i, _) in text.match_indices("KeyValue::new(") {
            let rest = text[i + "KeyValue::new(".len()..].trim_start();
            if let Some(lit) = rest.strip_prefix('"') {
                fields.insert(lit.split('"').next().unwrap().to_string());
            }
        }
        for (i, _) in text.match_indices("tracing::") {
            let rest = &text[i + "tracing::".len()..];
            let Some(open) = rest.find("!(") else {
                continue;
            };
            if !rest[..open]
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
            {
                continue;
            }
            let (literals, names) = arguments(&rest[open + 2..]);
            strings.extend(literals);
            fields.extend(names);
        }
    }
    let mut names = fields;
    let mut components = BTreeSet::new();
    let mut prefixes = BTreeSet::new();
    for s in &strings {
        let name = match s.split_once(": ") {
            Some((prefix, _)) if is_name(prefix) => {
                prefixes.insert(first_word(prefix));
                prefix
            }
            _ if is_name(s) => s.as_str(),
            _ => continue,
        };
        names.insert(name.to_string());
        if name.contains('.') {
            components.insert(first_word(name));
        }
    }
    Logged {
        strings,
        names,
        components,
        prefixes,
    }
}

/// `word` or `word.word…` of lowercase letters and `_`.
pub fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
}

pub fn first_word(name: &str) -> String {
    name.split('.').next().unwrap().to_string()
}

/// The string literals and field names of one macro's arguments, up to the
/// paren that closes them.
fn arguments(args: &str) -> (Vec<String>, Vec<String>) {
    let mut literals = Vec::new();
    let mut fields = Vec::new();
    let mut depth = 1;
    let mut chars = args.char_indices().peekable();
    // Text of the current top-level argument before its `=`.
    let mut head = String::new();
    while let Some((_, c)) = chars.next() {
        match c {
            '"' => {
                let mut lit = String::new();
                while let Some((_, c)) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => match chars.next().map(|(_, c)| c) {
                            // A continuation: the line break and the next
                            // line's leading blanks are not in the string.
                            Some('\n') => {
                                while chars.peek().is_some_and(|(_, c)| c.is_whitespace()) {
                                    chars.next();
                                }
                            }
                            Some('n') => lit.push('\n'),
                            Some(other) => lit.push(other),
                            None => {}
                        },
                        _ => lit.push(c),
                    }
                }
                literals.push(lit);
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            ',' if depth == 1 => head.clear(),
            '=' if depth == 1 && chars.peek().is_some_and(|(_, c)| *c != '>') => {
                let field = head.trim().trim_start_matches(['%', '?']);
                if is_name(field) {
                    fields.push(field.to_string());
                }
                head.clear();
            }
            _ if depth == 1 => head.push(c),
            _ => {}
        }
    }
    (literals, fields)
}
