//! MySQL's admission rule (contract §10.6): which of a SKU's new deductions the
//! ledger takes, in reservation order, and why it rejects the others.
//!
//! Redis admits first, so this rule only matters when Redis admitted more than
//! MySQL can hold — after Redis lost acknowledged writes (its records and buyer
//! counters), or a request id admitted twice. A buyer is checked against
//! `limit_per_user` before the stock: a buyer over the limit is refused even
//! while stock is left, and that unit stays in MySQL's stock (so Redis must
//! give it back); a deduction that does not fit the stock is over-admitted
//! (Redis never had the unit either). The rule is pure so it is tested here;
//! `db::ledger::apply` feeds it what it read under the SKU row lock.

use std::collections::HashMap;

/// Why a deduction is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The buyer would hold more than `limit_per_user` live units.
    LimitExceeded,
    /// Fewer units are available than the deduction takes.
    OverAdmitted,
}

/// One deduction as the rule sees it: its buyer and its count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub user_id: u64,
    pub count: i64,
}

/// The rule's answer for a batch of one SKU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// One answer per claim, in the claims' order: `None` taken.
    pub answers: Vec<Option<Refusal>>,
    /// Units taken in all.
    pub taken: i64,
}

/// Whether one claim of `count` units fits: `held` the buyer's live units
/// so far, `limit` the per-buyer limit, `left` the units not yet taken. The
/// limit first, then the stock. The one statement of MySQL's rule for a
/// single deduction and for an order's line (`db::ledger::apply_order`).
pub fn refusal(held: i64, count: i64, limit: i64, left: i64) -> Option<Refusal> {
    if held + count > limit {
        Some(Refusal::LimitExceeded)
    } else if count > left {
        Some(Refusal::OverAdmitted)
    } else {
        None
    }
}

/// Decides `claims` (in reservation order) against `available` units and
/// `limit` per buyer, where `held` is each buyer's live units before the batch.
pub fn admit(claims: &[Claim], available: i64, limit: i64, held: &HashMap<u64, i64>) -> Admitted {
    let mut held = held.clone();
    let mut remaining = available;
    let mut taken = 0;
    let answers = claims
        .iter()
        .map(|claim| {
            let buyer = held.entry(claim.user_id).or_insert(0);
            if let Some(why) = refusal(*buyer, claim.count, limit, remaining) {
                return Some(why);
            }
            remaining -= claim.count;
            taken += claim.count;
            *buyer += claim.count;
            None
        })
        .collect();
    Admitted { answers, taken }
}

#[cfg(test)]
mod tests {
    use super::Refusal::*;
    use super::*;

    fn claim(user_id: u64, count: i64) -> Claim {
        Claim { user_id, count }
    }

    #[test]
    fn claims_are_taken_in_order_until_the_stock_runs_out() {
        let got = admit(
            &[claim(1, 2), claim(2, 2), claim(3, 1)],
            3,
            5,
            &HashMap::new(),
        );
        assert_eq!(got.answers, [None, Some(OverAdmitted), None]);
        assert_eq!(got.taken, 3);
    }

    #[test]
    fn a_buyer_is_held_to_the_limit_with_what_they_held_before() {
        let held: HashMap<u64, i64> = [(1, 1)].into();
        let got = admit(&[claim(1, 1), claim(1, 1), claim(2, 2)], 10, 2, &held);
        assert_eq!(got.answers, [None, Some(LimitExceeded), None]);
        assert_eq!(got.taken, 3);
    }

    #[test]
    fn the_limit_is_checked_before_the_stock() {
        let got = admit(&[claim(1, 3)], 0, 2, &HashMap::new());
        assert_eq!(got.answers, [Some(LimitExceeded)]);
        assert_eq!(got.taken, 0);
    }

    #[test]
    fn a_refused_claim_takes_nothing_from_the_buyer_or_the_stock() {
        let got = admit(
            &[claim(1, 5), claim(1, 2), claim(2, 3)],
            5,
            5,
            &HashMap::new(),
        );
        assert_eq!(got.answers, [None, Some(LimitExceeded), Some(OverAdmitted)]);
        assert_eq!(got.taken, 5);
        let got = admit(
            &[claim(1, 4), claim(2, 2), claim(3, 1)],
            5,
            5,
            &HashMap::new(),
        );
        assert_eq!(got.answers, [None, Some(OverAdmitted), None]);
    }
}
