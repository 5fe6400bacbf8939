//! The model the history is checked against, one request id at a time, on
//! the ledger read after the drain (MySQL decides; docs/chaos.md, "History
//! check", states the same rules in prose):
//!
//! - reserve: an ok (201/202 new, 200 replay) id is in the ledger exactly once
//!   with the user and count asked, not `REJECTED`; at most one 201/202 per id;
//!   an id whose every attempt was a definite fail is not in the ledger; a
//!   retry that starts after an ok answered gets the first answer back (a 200
//!   replay of the same reservation, same `expires_at`), never a refusal;
//! - confirm / cancel: an ok ends `CONFIRMED` / `RELEASED`; a refusal that
//!   names a final state (`RESERVATION_RELEASED`, …) names the ledger's; only
//!   a confirm / cancel attempt can leave a row `CONFIRMED` / `CANCELLED`;
//! - info: counted by whether its effect is in the ledger.

use std::collections::BTreeMap;

use stockd::clock::rfc3339_ms;

use super::loss::Allowances;
use super::record::{Entry, Outcome};
use super::verdict::Verdict;
use crate::load::Op;
use crate::stores::LedgerRow;

/// Ledger reasons of a reservation MySQL refused after Redis over-admitted it.
const OVER_ADMISSION_REASONS: [&str; 2] = ["OVER_ADMITTED", "LIMIT_EXCEEDED"];

type Key = (u64, String);

/// Checks `entries` against the final `ledger` under `allow`.
pub fn check(entries: &[Entry], ledger: &[LedgerRow], allow: &Allowances) -> Verdict {
    let mut v = Verdict {
        declared: allow.describe(),
        ..Verdict::default()
    };
    let mut ops: BTreeMap<Key, Vec<&Entry>> = BTreeMap::new();
    for e in entries {
        match e.outcome() {
            Outcome::Ok => v.ok += 1,
            Outcome::Fail => v.fail += 1,
            Outcome::Info => v.info += 1,
            Outcome::Odd => v
                .unexpected
                .add(format!("answer outside the contract: {}", e.describe())),
        }
        ops.entry((e.req.sku, e.req.rid.clone()))
            .or_default()
            .push(e);
    }
    let mut rows: BTreeMap<Key, Vec<&LedgerRow>> = BTreeMap::new();
    for r in ledger {
        rows.entry((r.sku, r.rid.clone())).or_default().push(r);
        ops.entry((r.sku, r.rid.clone())).or_default();
    }
    for (key, mut key_ops) in ops {
        key_ops.sort_by_key(|e| e.invoked_ms);
        let key_rows = rows.get(&key).map(Vec::as_slice).unwrap_or_default();
        if key_rows.len() > 1 {
            v.duplicated.add(format!(
                "sku {} {}: {} ledger rows",
                key.0,
                key.1,
                key_rows.len()
            ));
        }
        let row = key_rows.first().copied();
        check_reservation(&key, &key_ops, row, allow, &mut v);
        check_lifecycle(&key, &key_ops, row, &mut v);
    }
    v
}

/// The reserve rules of one id.
fn check_reservation(
    key: &Key,
    ops: &[&Entry],
    row: Option<&LedgerRow>,
    allow: &Allowances,
    v: &mut Verdict,
) {
    let reserves: Vec<&Entry> = ops
        .iter()
        .copied()
        .filter(|e| e.req.op == Op::Reserve)
        .collect();
    let oks: Vec<&Entry> = of(&reserves, Outcome::Ok);
    let admitted: Vec<&Entry> = reserves.iter().copied().filter(|e| e.admitted()).collect();
    for e in of(&reserves, Outcome::Info) {
        v.info_went(e, row.is_some() && admitted.is_empty());
    }
    let Some(first_ok) = oks.first().copied() else {
        if let Some(row) = row.filter(|_| of(&reserves, Outcome::Info).is_empty()) {
            let why = if reserves.is_empty() {
                "never requested".to_string()
            } else {
                format!("every attempt refused ({})", reserves[0].describe())
            };
            v.unexpected.add(format!(
                "sku {} {} in the ledger ({}): {why}",
                key.0, key.1, row.status
            ));
        }
        return;
    };
    // The first attempt that may have written the id's Redis record: an ok,
    // or an unanswered one that ran (both are lost alike by a rollback).
    let first_effect_ms = reserves
        .iter()
        .filter(|e| matches!(e.outcome(), Outcome::Ok | Outcome::Info))
        .map(|e| e.invoked_ms)
        .min()
        .unwrap_or(first_ok.invoked_ms);
    let forgot = allow.may_forget(first_effect_ms);
    match row {
        None if oks
            .iter()
            .all(|e| allow.may_lose(e.done.status, e.invoked_ms)) =>
        {
            v.allow(
                "lost (not yet in the broker, expected)",
                first_ok.describe(),
            )
        }
        None => v
            .lost
            .add(format!("{}: not in the ledger", first_ok.describe())),
        Some(row) => check_row(first_ok, &oks, row, allow, v),
    }
    if admitted.len() > 1 {
        let what = format!(
            "{} admitted {} times: {}",
            key.1,
            admitted.len(),
            admitted[1].describe()
        );
        match forgot {
            true => v.allow("readmitted", what),
            false => v.duplicated.add(what),
        }
    }
    check_answers(&reserves, &admitted, row, forgot, v);
}

fn of<'a>(entries: &[&'a Entry], outcome: Outcome) -> Vec<&'a Entry> {
    entries
        .iter()
        .copied()
        .filter(|e| e.outcome() == outcome)
        .collect()
}

/// The ledger row of an acknowledged id holds what was asked, and stands.
fn check_row(
    first_ok: &Entry,
    oks: &[&Entry],
    row: &LedgerRow,
    allow: &Allowances,
    v: &mut Verdict,
) {
    let req = &first_ok.req;
    if row.user != req.user || row.count != i64::from(req.count) {
        v.unexpected.add(format!(
            "{}: ledger holds user {} x{}, asked user {} x{}",
            first_ok.describe(),
            row.user,
            row.count,
            req.user,
            req.count
        ));
    }
    if row.status != "REJECTED" {
        return;
    }
    let reason = row.reason.as_deref().unwrap_or("-");
    let over_admitted = OVER_ADMISSION_REASONS.contains(&reason);
    if over_admitted && oks.iter().any(|e| allow.may_reject(e.completed_ms)) {
        v.allow(
            &format!("rejected after ok ({reason})"),
            first_ok.describe(),
        );
    } else {
        v.lost.add(format!(
            "{}: acknowledged, ledger REJECTED {reason}",
            first_ok.describe()
        ));
    }
}

/// Every ok answer names the reservation asked for; a retry started after an
/// ok answered gets the first answer back.
fn check_answers(
    reserves: &[&Entry],
    admitted: &[&Entry],
    row: Option<&LedgerRow>,
    forgot: bool,
    v: &mut Verdict,
) {
    let ledger_expires = row.map(|r| rfc3339_ms(r.expires_at_ms));
    let expires = |e: &Entry| e.done.body.as_ref().map(|b| b.expires_at.clone());
    let mut first_answers: Vec<String> = admitted
        .first()
        .and_then(|e| expires(e))
        .or_else(|| ledger_expires.clone())
        .into_iter()
        .collect();
    if forgot {
        first_answers.extend(admitted.iter().filter_map(|e| expires(e)));
        first_answers.extend(ledger_expires.clone());
    }
    if let (false, Some(first), Some(ledger)) = (forgot, admitted.first(), &ledger_expires) {
        if expires(first).as_ref() != Some(ledger) {
            v.unexpected.add(format!(
                "{}: answered expires_at {:?}, ledger {ledger}",
                first.describe(),
                expires(first)
            ));
        }
    }
    let first_done = reserves
        .iter()
        .filter(|e| e.outcome() == Outcome::Ok)
        .map(|e| e.completed_ms)
        .min();
    for e in reserves {
        check_one_answer(e, &first_answers, first_done, forgot, v);
    }
}

fn check_one_answer(
    e: &Entry,
    first_answers: &[String],
    first_ok_done_ms: Option<u64>,
    forgot: bool,
    v: &mut Verdict,
) {
    match e.outcome() {
        Outcome::Ok => match &e.done.body {
            None => v
                .unexpected
                .add(format!("{}: no reservation in the body", e.describe())),
            Some(b)
                if b.request_id != e.req.rid
                    || b.user_id != e.req.user
                    || b.count != e.req.count =>
            {
                v.unexpected
                    .add(format!("{}: answered {b:?}", e.describe()))
            }
            Some(b) if e.replay() && !first_answers.contains(&b.expires_at) => {
                v.unexpected.add(format!(
                    "{}: replay answered expires_at {}, first answer {first_answers:?}",
                    e.describe(),
                    b.expires_at
                ))
            }
            Some(_) => {}
        },
        Outcome::Fail if first_ok_done_ms.is_some_and(|done| done <= e.invoked_ms) => {
            let what = format!("{}: retry of an acknowledged id refused", e.describe());
            match forgot {
                true => v.allow("refused after ok", what),
                false => v.unexpected.add(what),
            }
        }
        _ => {}
    }
}

/// The confirm / cancel rules of one id.
fn check_lifecycle(key: &Key, ops: &[&Entry], row: Option<&LedgerRow>, v: &mut Verdict) {
    let status = row.map(|r| r.status.as_str());
    let cancelled = row.is_some_and(|r| r.reason.as_deref() == Some("CANCELLED"));
    let attempted = |op: Op| {
        ops.iter()
            .any(|e| e.req.op == op && matches!(e.outcome(), Outcome::Ok | Outcome::Info))
    };
    for (op, target) in [(Op::Confirm, "CONFIRMED"), (Op::Cancel, "RELEASED")] {
        for e in ops.iter().filter(|e| e.req.op == op) {
            match e.outcome() {
                Outcome::Ok if status != Some(target) => v
                    .lost
                    .add(format!("{}: ledger ends {status:?}", e.describe())),
                Outcome::Ok => {
                    let said = e.done.body.as_ref().map(|b| b.status.as_str());
                    if said != Some(target) {
                        v.unexpected
                            .add(format!("{}: answered status {said:?}", e.describe()));
                    }
                }
                Outcome::Info => v.info_went(
                    e,
                    status == Some(target) && (op == Op::Confirm || cancelled),
                ),
                Outcome::Fail => match claimed_state(&e.done.code) {
                    Some(claimed) if status != Some(claimed) => v
                        .unexpected
                        .add(format!("{}: ledger ends {status:?}", e.describe())),
                    _ => {}
                },
                Outcome::Odd => {}
            }
        }
    }
    let what = |state: &str| format!("sku {} {} {state} without a confirm/cancel", key.0, key.1);
    if status == Some("CONFIRMED") && !attempted(Op::Confirm) {
        v.unexpected.add(what("CONFIRMED"));
    }
    if status == Some("RELEASED") && cancelled && !attempted(Op::Cancel) {
        v.unexpected.add(what("RELEASED CANCELLED"));
    }
}

/// The final state a confirm / cancel refusal says the reservation is in.
fn claimed_state(code: &str) -> Option<&'static str> {
    match code {
        "RESERVATION_RELEASED" => Some("RELEASED"),
        "RESERVATION_CONFIRMED" => Some("CONFIRMED"),
        "RESERVATION_REJECTED" => Some("REJECTED"),
        _ => None,
    }
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
