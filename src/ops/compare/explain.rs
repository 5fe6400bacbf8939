//! What in-flight work explains of the gap between the stores, from one
//! comparison's reads: exactly, each Redis winner paired with its ledger
//! status; or, when the winners were too many to list, an estimate from the
//! counters alone. Pure: `read.rs` gathers the inputs.
//!
//! The estimate: a release landing between the MySQL snapshot (t1) and the
//! Redis snapshot (t2) lifts Redis above MySQL without any fault. So Redis'
//! `available` is also read once before t1 (t0), and Redis is judged by the
//! lower of the two readings ([`estimated_in_flight`]). A real loss of
//! deductions keeps both readings high; a release in the window lifts only
//! the later one.

use std::collections::{HashMap, HashSet};

use super::comparison::{RedisDecided, Unapplied};
use crate::domain::ReservationStatus;
use crate::redis::{RedisSnapshot, WinnerRecord};

/// Units a (MySQL status, Redis status) pair puts between MySQL's and Redis'
/// available counts (positive: MySQL above Redis).
pub(super) fn contribution(
    mysql: Option<ReservationStatus>,
    redis: Option<ReservationStatus>,
    count: i64,
) -> i64 {
    use ReservationStatus::*;
    match (mysql, redis) {
        // Redis took it, MySQL has not applied it (yet, in this snapshot).
        (None, Some(Reserved | Confirmed)) => count,
        // MySQL released it, Redis has not returned it yet.
        (Some(Released), Some(Reserved)) => count,
        // Released and mirrored after the MySQL snapshot began.
        (Some(Reserved | Confirmed), Some(Released)) => -count,
        _ => 0,
    }
}

/// What in-flight work explains (the fields of
/// [`super::comparison::Comparison`] of the same names).
pub(super) struct Explained {
    pub in_flight: i64,
    pub unapplied: i64,
    pub unapplied_records: Vec<Unapplied>,
    pub exact: bool,
    pub missing_in_redis: i64,
    pub decided_in_redis_only: Vec<RedisDecided>,
}

/// The exact figures: each Redis winner paired with its ledger status
/// (`missing_in_redis` is left 0 for the caller).
pub(super) fn pair_winners(
    winners: &[WinnerRecord],
    statuses: &HashMap<String, ReservationStatus>,
) -> Explained {
    use ReservationStatus::{Confirmed, Released, Reserved};
    let mut explained = Explained {
        in_flight: 0,
        unapplied: 0,
        unapplied_records: Vec::new(),
        exact: true,
        missing_in_redis: 0,
        decided_in_redis_only: Vec::new(),
    };
    for w in winners {
        let mysql = statuses.get(&w.request_id).copied();
        let c = contribution(mysql, w.status, w.count);
        explained.in_flight += c;
        match (mysql, w.status) {
            (None, Some(status)) if c > 0 => {
                explained.unapplied += c;
                explained.unapplied_records.push(Unapplied {
                    request_id: w.request_id.clone(),
                    count: w.count,
                    created_ms: w.created_ms,
                    status,
                });
            }
            (Some(Reserved), Some(status @ (Confirmed | Released)))
            | (None, Some(status @ Released)) => {
                explained.decided_in_redis_only.push(RedisDecided {
                    request_id: w.request_id.clone(),
                    status,
                })
            }
            _ => {}
        }
    }
    explained
}

/// The estimate when the winners cannot be listed: whatever separates the
/// stores, if Redis is below (nothing when the SKU is not loaded in Redis).
pub(super) fn estimate(
    mysql_available: i64,
    available_before: Option<i64>,
    snapshot: Option<&RedisSnapshot>,
) -> Explained {
    let in_flight = snapshot.map_or(0, |s| {
        estimated_in_flight(mysql_available, available_before, s.available)
    });
    Explained {
        in_flight,
        unapplied: in_flight.max(0),
        unapplied_records: Vec::new(),
        exact: false,
        missing_in_redis: 0,
        decided_in_redis_only: Vec::new(),
    }
}

/// In-flight units when the winners cannot be listed: whatever separates
/// MySQL (`mysql`, at t1) from Redis (`after`, at t2), where Redis counts at the
/// lower of its readings before t1 and at t2. So the drift (`after - mysql +
/// in_flight`) is `max(min(before, after) - mysql, 0)`: only Redis above MySQL at
/// both readings is drift; Redis below MySQL is in flight.
fn estimated_in_flight(mysql: i64, before: Option<i64>, after: i64) -> i64 {
    let floor = before.map_or(after, |b| b.min(after));
    mysql.max(floor) - after
}

/// Of `live` (ledger rows recent enough that Redis must still hold their
/// record), those whose record Redis does not have (0 when there are too many
/// to list).
pub(super) fn count_missing(live: &[String], winners: &[WinnerRecord], max_rows: usize) -> i64 {
    if live.len() > max_rows {
        return 0;
    }
    let held: HashSet<&str> = winners
        .iter()
        .filter(|w| w.status.is_some())
        .map(|w| w.request_id.as_str())
        .collect();
    live.iter().filter(|id| !held.contains(id.as_str())).count() as i64
}

#[cfg(test)]
mod tests {
    use super::{contribution, estimated_in_flight};
    use crate::domain::ReservationStatus::*;

    /// Drift as the comparison's verdict computes it from the estimate.
    fn estimated_drift(mysql: i64, before: Option<i64>, after: i64) -> i64 {
        after - (mysql - estimated_in_flight(mysql, before, after))
    }

    #[test]
    fn an_estimate_blames_redis_only_when_both_readings_are_above_mysql() {
        // Quiet: Redis below MySQL by what is in flight.
        assert_eq!(estimated_drift(100, Some(90), 90), 0);
        assert_eq!(estimated_in_flight(100, Some(90), 90), 10);
        // A release returned to MySQL after t1 and to Redis before t2.
        assert_eq!(estimated_drift(100, Some(100), 101), 0);
        // Lost deductions: Redis above MySQL before and after.
        assert_eq!(estimated_drift(100, Some(103), 103), 3);
        assert_eq!(estimated_drift(100, Some(104), 103), 3);
        // No reading before (SKU not loaded then): the one reading decides.
        assert_eq!(estimated_drift(100, None, 102), 2);
    }

    #[test]
    fn in_flight_pairs_explain_the_gap_and_settled_pairs_do_not() {
        assert_eq!(contribution(None, Some(Reserved), 2), 2);
        assert_eq!(contribution(Some(Released), Some(Reserved), 2), 2);
        assert_eq!(contribution(Some(Reserved), Some(Released), 2), -2);
        assert_eq!(contribution(Some(Reserved), Some(Reserved), 2), 0);
        assert_eq!(contribution(Some(Released), Some(Released), 2), 0);
        assert_eq!(contribution(Some(Rejected), Some(Reserved), 2), 0);
        assert_eq!(contribution(Some(Confirmed), Some(Reserved), 2), 0);
        assert_eq!(contribution(None, Some(Rejected), 2), 0);
    }
}
