//! The history model on small hand-made histories: each rule can fail, and
//! each allowance holds only where a loss is declared, on the right side of it.

use super::check;
use crate::history::loss::{Allowances, Declared, RedisLoss};
use crate::history::record::{Body, Completion, Entry, Request};
use crate::load::Op;
use crate::stores::LedgerRow;

const SKU: u64 = 7;
const USER: u64 = 3;
const EXPIRES_MS: u64 = 1_700_000_000_000;

fn op(op: Op, rid: &str, at_ms: u64, status: u16, code: &str) -> Entry {
    let replayed = op == Op::Reserve && status == 200;
    let body = (200..300).contains(&status).then(|| Body {
        request_id: rid.to_string(),
        user_id: USER,
        count: 1,
        status: match op {
            Op::Reserve => "RESERVED",
            Op::Confirm => "CONFIRMED",
            Op::Cancel => "RELEASED",
        }
        .to_string(),
        expires_at: stockd::clock::rfc3339_ms(EXPIRES_MS),
    });
    Entry {
        req: Request {
            op,
            sku: SKU,
            rid: rid.to_string(),
            user: USER,
            count: 1,
        },
        invoked_ms: at_ms,
        completed_ms: at_ms + 10,
        done: Completion {
            status,
            code: code.to_string(),
            replayed,
            body,
        },
    }
}

fn reserve(rid: &str, at_ms: u64, status: u16) -> Entry {
    op(Op::Reserve, rid, at_ms, status, "")
}

fn row(rid: &str, status: &str, reason: Option<&str>) -> LedgerRow {
    LedgerRow {
        sku: SKU,
        rid: rid.to_string(),
        user: USER,
        count: 1,
        status: status.to_string(),
        reason: reason.map(str::to_string),
        expires_at_ms: EXPIRES_MS,
        redis_pending: false,
    }
}

fn stale_at(at_ms: u64) -> Allowances {
    Allowances {
        declared: vec![Declared {
            kind: RedisLoss::Stale,
            what: "rollback".into(),
            from_ms: at_ms,
            to_ms: at_ms,
        }],
        durability_redis: false,
    }
}

fn strict() -> Allowances {
    Allowances::default()
}

#[test]
fn an_acknowledged_reservation_in_the_ledger_once_passes() {
    let h = [reserve("a", 0, 201), reserve("a", 50, 200)];
    let v = check(&h, &[row("a", "RESERVED", None)], &strict());
    assert!(v.passed(), "{v:?}");
    assert_eq!((v.ok, v.fail, v.info), (2, 0, 0));
}

#[test]
fn an_acknowledged_reservation_missing_from_the_ledger_is_lost() {
    let v = check(&[reserve("a", 0, 201)], &[], &strict());
    assert_eq!(v.lost.count, 1);
    assert!(!v.passed());
}

#[test]
fn two_admissions_of_one_id_are_duplicated_unless_a_stale_loss_came_between() {
    let h = [reserve("a", 0, 201), reserve("a", 500, 201)];
    let rows = [row("a", "RESERVED", None)];
    assert_eq!(check(&h, &rows, &strict()).duplicated.count, 1);
    let v = check(&h, &rows, &stale_at(100));
    assert!(v.passed(), "{v:?}");
    assert_eq!(v.allowed["readmitted"].count, 1);
    assert_eq!(check(&h, &rows, &stale_at(0)).duplicated.count, 1);
}

#[test]
fn a_definite_fail_in_the_ledger_is_unexpected_but_a_later_ok_explains_it() {
    let refused = [reserve("a", 0, 409)];
    let rows = [row("a", "RESERVED", None)];
    assert_eq!(check(&refused, &rows, &strict()).unexpected.count, 1);
    let retried = [reserve("a", 0, 409), reserve("a", 100, 201)];
    assert!(check(&retried, &rows, &strict()).passed());
}

#[test]
fn an_unanswered_reserve_counts_as_taken_when_only_it_can_have_made_the_row() {
    let h = [
        reserve("a", 0, 503),
        reserve("a", 100, 200),
        reserve("b", 0, 0),
    ];
    let v = check(&h, &[row("a", "RESERVED", None)], &strict());
    assert!(v.passed(), "{v:?}");
    assert_eq!((v.info_taken(), v.info_not_taken()), (1, 1));
    assert_eq!(v.info_by_op[&Op::Reserve], (1, 1));
}

#[test]
fn an_unanswered_attempt_that_ran_before_a_rollback_may_be_admitted_anew() {
    // The 503 ran: its deduction is in the ledger (expires 1 s later than the
    // second admission answered), its Redis record was rolled back, so the
    // replay after the rollback was admitted anew with another expiry.
    let h = [reserve("a", 0, 503), reserve("a", 500, 201)];
    let mut first_run = row("a", "RESERVED", None);
    first_run.expires_at_ms = EXPIRES_MS - 1_000;
    let rows = [first_run];
    assert_eq!(check(&h, &rows, &strict()).unexpected.count, 1);
    assert!(check(&h, &rows, &stale_at(100)).passed());
    // A rollback before the unanswered attempt cannot have lost its record.
    let h = [reserve("a", 200, 503), reserve("a", 500, 201)];
    assert_eq!(check(&h, &rows, &stale_at(100)).unexpected.count, 1);
}

#[test]
fn a_retry_refused_after_an_ok_is_unexpected_unless_redis_forgot_the_id() {
    let h = [reserve("a", 0, 201), reserve("a", 100, 409)];
    let rows = [row("a", "RESERVED", None)];
    assert_eq!(check(&h, &rows, &strict()).unexpected.count, 1);
    assert!(check(&h, &rows, &stale_at(50)).passed());
    // Sent before the ok answered: it may have run first; not a finding.
    let overlapping = [reserve("a", 0, 201), reserve("a", 5, 409)];
    assert!(check(&overlapping, &rows, &strict()).passed());
}

#[test]
fn a_replay_with_another_expiry_than_the_first_answer_is_unexpected() {
    let mut replay = reserve("a", 100, 200);
    replay.done.body.as_mut().unwrap().expires_at = stockd::clock::rfc3339_ms(EXPIRES_MS + 1);
    let h = [reserve("a", 0, 201), replay];
    let v = check(&h, &[row("a", "RESERVED", None)], &strict());
    assert_eq!(v.unexpected.count, 1, "{v:?}");
}

#[test]
fn rejected_after_ok_is_allowed_only_for_admissions_after_a_stale_loss() {
    let h = [reserve("a", 1_000, 201)];
    let rows = [row("a", "REJECTED", Some("OVER_ADMITTED"))];
    assert_eq!(check(&h, &rows, &strict()).lost.count, 1);
    assert_eq!(check(&h, &rows, &stale_at(2_000)).lost.count, 1);
    let v = check(&h, &rows, &stale_at(500));
    assert!(v.passed(), "{v:?}");
    assert_eq!(v.allowed["rejected after ok (OVER_ADMITTED)"].count, 1);
}

#[test]
fn a_lost_reservation_is_expected_only_when_its_answer_did_not_promise_the_broker() {
    let emptied = |durability_redis| Allowances {
        declared: vec![Declared {
            kind: RedisLoss::Emptied,
            what: "restart empty".into(),
            from_ms: 900,
            to_ms: 1_000,
        }],
        durability_redis,
    };
    let queued = [reserve("a", 0, 201)];
    assert_eq!(check(&queued, &[], &emptied(false)).lost.count, 1);
    assert!(check(&queued, &[], &emptied(true)).passed());
    assert!(check(&[reserve("a", 0, 202)], &[], &emptied(false)).passed());
    assert_eq!(
        check(&[reserve("a", 2_000, 202)], &[], &emptied(false))
            .lost
            .count,
        1
    );
}

#[test]
fn confirm_and_cancel_answers_must_match_the_final_state() {
    let confirmed = [reserve("a", 0, 201), op(Op::Confirm, "a", 20, 200, "")];
    assert!(check(&confirmed, &[row("a", "CONFIRMED", None)], &strict()).passed());
    let v = check(&confirmed, &[row("a", "RESERVED", None)], &strict());
    assert_eq!(v.lost.count, 1);
    let refused = [
        reserve("a", 0, 201),
        op(Op::Cancel, "a", 20, 409, "RESERVATION_CONFIRMED"),
    ];
    let v = check(
        &refused,
        &[row("a", "RELEASED", Some("CANCELLED"))],
        &strict(),
    );
    // The refusal named another state, and nobody else cancelled it.
    assert_eq!(v.unexpected.count, 2, "{v:?}");
}

#[test]
fn a_row_nobody_asked_for_is_unexpected() {
    let v = check(&[], &[row("ghost", "RESERVED", None)], &strict());
    assert_eq!(v.unexpected.count, 1);
}

#[test]
fn an_unanswered_confirm_counts_as_taken_when_the_row_ends_confirmed() {
    let h = [
        reserve("a", 0, 201),
        op(Op::Confirm, "a", 20, 503, "UNAVAILABLE"),
    ];
    let v = check(&h, &[row("a", "CONFIRMED", None)], &strict());
    assert!(v.passed(), "{v:?}");
    assert_eq!(v.info_by_op[&Op::Confirm], (1, 0));
    let v = check(&h, &[row("a", "RELEASED", Some("EXPIRED"))], &strict());
    assert_eq!(v.info_by_op[&Op::Confirm], (0, 1));
}
