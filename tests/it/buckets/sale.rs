//! The big sale's steps (see `a_skewed_crowd_sells_exactly_…` in the parent
//! module): the sale judged exact, replays of its winners, and the cancels
//! that reopen the sold-out SKU for new buyers of every bucket.

use std::collections::{BTreeMap, HashMap};

use super::load::{self, Outcome, Req, Tally};
use super::split::{view, Split};
use super::{
    Findings, BUCKETS, CANCEL_COLD, CANCEL_COLD_BUCKET, CANCEL_HOT, HOT, LIMIT, REBUY_BUYERS_FROM,
    REOPEN_WAIT, REPLAYS_PER_BUCKET, SKU, TOTAL_STOCK, UNAVAILABLE_MAX,
};
use crate::helpers::TestApp;

/// Exactly the stock admitted, only the contract's refusals, no buyer over the limit
/// (as answered), and the SKU empty everywhere: pool and every bucket.
pub async fn assert_sale_exact(
    app: &TestApp,
    plan: &[Req],
    tally: &Tally,
    findings: &mut Findings,
) {
    assert!(
        tally.unexpected.is_empty(),
        "{} unexpected answers, first: {:?}",
        tally.unexpected.len(),
        &tally.unexpected[..tally.unexpected.len().min(10)]
    );
    findings.note(
        tally.unavailable.len() <= UNAVAILABLE_MAX,
        format!(
            "{} answers 503 / none (bound {UNAVAILABLE_MAX}; plan indexes {:?}..={:?}); \
             by detail and retry: {:?}; first (index, answer, retry's answer): {:?}",
            tally.unavailable.len(),
            tally.unavailable.first().map(|u| u.0),
            tally.unavailable.last().map(|u| u.0),
            unavailable_details(tally),
            &tally.unavailable[..tally.unavailable.len().min(2)]
        ),
    );
    let split = view(app, SKU).await;
    assert_eq!(
        tally.admitted.len() as i64,
        TOTAL_STOCK,
        "admitted (201/202) vs stock; refused {:?}; SKU now {split:?}",
        tally.refused
    );
    let mut per_buyer: HashMap<u64, i64> = HashMap::new();
    for &i in &tally.admitted {
        *per_buyer.entry(plan[i].user).or_default() += 1;
    }
    let over: Vec<_> = per_buyer.iter().filter(|(_, &n)| n > LIMIT).collect();
    assert!(over.is_empty(), "buyers admitted over {LIMIT}: {over:?}");
    assert_empty(&split, "after the sale", findings);
}

/// Unavailable answers counted by their `detail` (what the api said was
/// unavailable) and by what their retry answered.
fn unavailable_details(tally: &Tally) -> BTreeMap<String, usize> {
    let mut by = BTreeMap::new();
    for (_, first, retry) in &tally.unavailable {
        let detail = first.body["detail"].as_str().unwrap_or("no answer");
        let then = retry.code.as_deref().unwrap_or("-");
        *by.entry(format!("{detail} -> retry {} {then}", retry.status))
            .or_default() += 1;
    }
    by
}

/// The view of a sold-out split SKU: nothing anywhere, and (noted) saying so.
fn assert_empty(split: &Split, when: &str, findings: &mut Findings) {
    assert_eq!((split.available, split.pool), (0, 0), "{when}: {split:?}");
    findings.note(
        split.sold_out,
        format!("{when}: everything empty but sold_out false: {split:?}"),
    );
    assert_eq!(split.buckets, u64::from(BUCKETS), "{when}: {split:?}");
    assert_eq!(split.stock.len(), usize::from(BUCKETS), "{when}: {split:?}");
    for (b, bucket) in split.stock.iter().enumerate() {
        assert_eq!(
            (bucket.bucket, bucket.available),
            (b as u64, 0),
            "{when}: {split:?}"
        );
    }
}

/// A sample of winners of every bucket sends its request again: 200, the
/// header, the stored reservation.
pub async fn assert_replays(app: &TestApp, plan: &[Req], admitted: &[usize]) {
    for b in 0..BUCKETS {
        let winners = admitted.iter().map(|&i| &plan[i]).filter(|r| r.bucket == b);
        let mut sent = 0;
        for req in winners.take(REPLAYS_PER_BUCKET) {
            let a = load::reserve(app, SKU, req).await;
            assert_eq!(
                (a.status, a.replayed, a.body["request_id"].as_str()),
                (200, true, Some(req.rid.as_str())),
                "replay of {req:?}: {}",
                a.body
            );
            assert_eq!(a.body["status"], "RESERVED", "{}", a.body);
            sent += 1;
        }
        assert!(sent > 0, "no winner in bucket {b}");
    }
}

/// Cancels reopen the sold-out SKU; new buyers of every bucket buy exactly
/// the released units, none refused while a unit is left; then sold out.
pub async fn cancels_reopen_and_sell_again(
    app: &TestApp,
    plan: &[Req],
    admitted: &[usize],
    findings: &mut Findings,
) {
    let released = cancel_cold_and_hot_winners(app, plan, admitted).await;
    app.eventually("the SKU reopened", REOPEN_WAIT, || async {
        let split = view(app, SKU).await;
        split.available == released as i64 && !split.sold_out
    })
    .await;
    let per_bucket = released + 1;
    let buyers = load::pick_buyers(REBUY_BUYERS_FROM, BUCKETS, &[per_bucket; 3]);
    rebuy_round_robin(app, &buyers, released, findings).await;
    for req in load::one_per_bucket(&buyers, released, |b| format!("late-{b}")) {
        let a = load::reserve(app, SKU, &req).await;
        assert_eq!(
            (a.status, a.code.as_deref()),
            (409, Some("SOLD_OUT")),
            "a buyer of bucket {} after the rebuy: {}",
            req.bucket,
            a.body
        );
    }
    assert_empty(&view(app, SKU).await, "after the rebuy", findings);
}

/// Cancels `CANCEL_COLD` winners of the cold bucket and `CANCEL_HOT` of
/// the hot one (each answered RELEASED); returns how many units that released.
async fn cancel_cold_and_hot_winners(app: &TestApp, plan: &[Req], admitted: &[usize]) -> usize {
    let winners_of = |b: u16, n: usize| -> Vec<&Req> {
        let of_b = admitted.iter().map(|&i| &plan[i]).filter(|r| r.bucket == b);
        of_b.take(n).collect()
    };
    let mut cancelled = winners_of(CANCEL_COLD_BUCKET, CANCEL_COLD);
    cancelled.extend(winners_of(HOT, CANCEL_HOT));
    let released = CANCEL_COLD + CANCEL_HOT;
    assert_eq!(cancelled.len(), released, "winners to cancel");
    for req in &cancelled {
        let (status, body) = app.cancel(SKU, &req.rid).await;
        assert_eq!(
            (status, body["status"].as_str()),
            (200, Some("RELEASED")),
            "cancel {req:?}: {body}"
        );
    }
    released
}

/// New buyers, one per bucket in turn, buy the `released` units: exactly
/// that many admitted; a refusal while units are left is noted.
async fn rebuy_round_robin(
    app: &TestApp,
    buyers: &[Vec<u64>],
    released: usize,
    findings: &mut Findings,
) {
    let mut bought = 0;
    let mut refused_while_left = Vec::new();
    // Round robin over the buckets, one new buyer each time: bounded by
    // `released` rounds, so at most 3 × `released` attempts.
    'rounds: for k in 0..released {
        for req in load::one_per_bucket(buyers, k, |b| format!("again{k}-{b}")) {
            if bought == released {
                break 'rounds;
            }
            let a = load::reserve(app, SKU, &req).await;
            match load::outcome(&a, false) {
                Outcome::Admitted => bought += 1,
                Outcome::Refused(code) => {
                    let left = view(app, SKU).await;
                    if left.available > 0 {
                        refused_while_left.push((req, code, left));
                    }
                }
                other => panic!("rebuy {req:?}: {other:?} {} {}", a.status, a.body),
            }
        }
    }
    findings.note(
        refused_while_left.is_empty(),
        format!(
            "rebuy: {} buyers refused while units were left (bought {bought} of {released}); \
             (request, code, SKU right after): {refused_while_left:?}",
            refused_while_left.len()
        ),
    );
    assert_eq!(bought, released, "released units bought again");
}
