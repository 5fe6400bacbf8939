//! The command tables (README "Roles and subcommands", contract §1) are the
//! command line clap parses: every `stockd …` they show names subcommands,
//! flags and roles that exist; every subcommand and its flags have a row; and
//! every role `--role` takes has one, as in the hint src/main.rs prints when
//! given nothing to do. The command tree is the library's own `Cli`, as the
//! binary builds it.

use std::collections::BTreeSet;

use clap::CommandFactory;
use stockd::cli::Cli;

use super::{all_tables, at, code_spans};

/// Flags every command has, documented by clap itself.
const CLAP_FLAGS: [&str; 2] = ["--help", "--version"];

/// A documented invocation: its subcommand path and flags.
struct Invocation {
    place: String,
    path: Vec<String>,
    flags: Vec<String>,
    roles: Vec<String>,
}

/// `stockd dlq list|replay|drop [--queue deduct|expiry]` → one invocation per
/// alternative subcommand, each with every flag of the span.
fn parse(place: &str, span: &str) -> Vec<Invocation> {
    let words: Vec<&str> = span.split_whitespace().skip(1).collect();
    let mut paths: Vec<Vec<String>> = vec![Vec::new()];
    let mut flags = Vec::new();
    let mut roles = Vec::new();
    let mut in_path = true;
    for (i, w) in words.iter().enumerate() {
        let bare = w.trim_matches(|c| c == '[' || c == ']');
        if bare.starts_with("--") {
            in_path = false;
            flags.push(bare.to_string());
            if bare == "--role" {
                roles.extend(
                    words
                        .get(i + 1)
                        .into_iter()
                        .flat_map(|r| r.split('|'))
                        .map(str::to_string),
                );
            }
        } else if in_path
            && bare.chars().all(|c| c.is_ascii_lowercase() || c == '|')
            && !bare.is_empty()
        {
            let alts: Vec<&str> = bare.split('|').collect();
            paths = paths
                .iter()
                .flat_map(|p| {
                    alts.iter()
                        .map(move |a| [p.clone(), vec![a.to_string()]].concat())
                })
                .collect();
        } else {
            in_path = false;
        }
    }
    paths
        .into_iter()
        .map(|path| Invocation {
            place: place.to_string(),
            path,
            flags: flags.clone(),
            roles: roles.clone(),
        })
        .collect()
}

/// Every invocation of the command tables, with every flag its row names
/// (`drop` needs `--yes` in the description): they count for completeness, not
/// for existence (a description may name a flag of another tool).
fn documented() -> Vec<(Invocation, Vec<String>)> {
    let mut out = Vec::new();
    for (file, table) in all_tables()
        .iter()
        .filter(|(_, t)| t.first_header_is("command"))
    {
        for (line, row) in &table.rows {
            let spans: Vec<String> = row.iter().flat_map(|c| code_spans(c)).collect();
            let row_flags: Vec<String> = spans
                .iter()
                .filter(|s| s.starts_with("--"))
                .cloned()
                .collect();
            for span in spans.iter().filter(|s| s.starts_with("stockd ")) {
                out.extend(
                    parse(&at(file, *line), span)
                        .into_iter()
                        .map(|i| (i, row_flags.clone())),
                );
            }
        }
    }
    out
}

/// The long flags of a command, globals of the root included.
fn long_flags(cmd: &clap::Command, root: &clap::Command) -> BTreeSet<String> {
    cmd.get_arguments()
        .chain(root.get_arguments().filter(|a| a.is_global_set()))
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .chain(CLAP_FLAGS.iter().map(|f| f.to_string()))
        .collect()
}

/// Every visible leaf subcommand, as its path.
fn leaves(cmd: &clap::Command, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let subs: Vec<_> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .collect();
    if subs.is_empty() && !prefix.is_empty() {
        out.push(prefix.clone());
    }
    for s in subs {
        leaves(
            s,
            [prefix.clone(), vec![s.get_name().to_string()]].concat(),
            out,
        );
    }
}

fn find<'a>(root: &'a clap::Command, path: &[String]) -> Option<&'a clap::Command> {
    // A hidden subcommand (`bench`, which only points at `stockd-bench`) is
    // no command a table may show.
    path.iter().try_fold(root, |c, name| {
        c.find_subcommand(name).filter(|s| !s.is_hide_set())
    })
}

#[test]
fn the_command_tables_are_the_command_line() {
    let root = Cli::command();
    let docs = documented();
    assert!(!docs.is_empty(), "no `command` table with `stockd …` rows");
    let mut bad = Vec::new();
    for (inv, _) in &docs {
        let Some(cmd) = find(&root, &inv.path) else {
            bad.push(format!(
                "{}: `stockd {}` is no subcommand",
                inv.place,
                inv.path.join(" ")
            ));
            continue;
        };
        let known = long_flags(cmd, &root);
        for flag in inv.flags.iter().filter(|f| !known.contains(*f)) {
            bad.push(format!(
                "{}: `stockd {}` has no flag {flag}",
                inv.place,
                inv.path.join(" ")
            ));
        }
    }
    let mut paths = Vec::new();
    leaves(&root, Vec::new(), &mut paths);
    for path in &paths {
        let rows: Vec<_> = docs.iter().filter(|(d, _)| &d.path == path).collect();
        if rows.is_empty() {
            bad.push(format!(
                "no command table row for `stockd {}`",
                path.join(" ")
            ));
            continue;
        }
        let cmd = find(&root, path).unwrap();
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            let Some(long) = arg.get_long().map(|l| format!("--{l}")) else {
                continue;
            };
            for (row, _) in rows
                .iter()
                .filter(|(r, f)| !r.flags.contains(&long) && !f.contains(&long))
            {
                bad.push(format!(
                    "{}: `stockd {}` without its flag {long}",
                    row.place,
                    path.join(" ")
                ));
            }
        }
    }
    let roles: BTreeSet<String> = root
        .get_arguments()
        .find(|a| a.get_long() == Some("role"))
        .unwrap()
        .get_possible_values()
        .iter()
        .map(|v| v.get_name().to_string())
        .collect();
    let shown: BTreeSet<String> = docs.iter().flat_map(|(d, _)| d.roles.clone()).collect();
    for r in shown.difference(&roles) {
        bad.push(format!("`--role {r}` is no role (roles: {roles:?})"));
    }
    for r in roles.difference(&shown) {
        bad.push(format!("no command table row for `stockd --role {r}`"));
    }
    bad.dedup();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The hint `stockd` prints when given nothing to do (src/main.rs) names
/// every role, as the tables do.
#[test]
fn the_nothing_to_do_hint_names_every_role() {
    let main = super::read("src/main.rs");
    let hint = main
        .split("--role ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("src/main.rs has a `--role a|b` hint");
    let named: BTreeSet<&str> = hint.split('|').collect();
    let root = Cli::command();
    let roles: BTreeSet<String> = root
        .get_arguments()
        .find(|a| a.get_long() == Some("role"))
        .unwrap()
        .get_possible_values()
        .iter()
        .map(|v| v.get_name().to_string())
        .collect();
    let roles: BTreeSet<&str> = roles.iter().map(String::as_str).collect();
    assert_eq!(named, roles, "src/main.rs: `--role {hint}`");
}

/// Contract §1's role table ("role | runs") has a row for every role but
/// `all` (every role in one process, said above it), and no other.
#[test]
fn the_role_table_names_every_role() {
    let root = Cli::command();
    let roles: BTreeSet<String> = root
        .get_arguments()
        .find(|a| a.get_long() == Some("role"))
        .unwrap()
        .get_possible_values()
        .iter()
        .map(|v| v.get_name().to_string())
        .filter(|r| r != "all")
        .collect();
    let (file, table) = all_tables()
        .into_iter()
        .find(|(_, t)| t.first_header_is("role"))
        .expect("contract §1 has a table headed `role`");
    let rows: BTreeSet<String> = table
        .rows
        .iter()
        .map(|(_, r)| code_spans(&r[0]).concat())
        .collect();
    assert_eq!(
        rows,
        roles,
        "{}: the roles of `--role`",
        at(&file, table.line)
    );
}
