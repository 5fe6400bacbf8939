//! Work that stopped moving (contract §8 `STUCK`): deductions sitting in the deduct
//! dead-letter queue, or reservations Redis took that MySQL still lacks long
//! after a healthy pipeline would have applied them (`reconcile.stuck_after_ms`).
//!
//! A dead-lettered deduction usually is also an old in-flight record; it is
//! counted once, under `dlq`, because that is where the operator acts
//! (`stockd dlq replay`). Pure functions: the reconciler gathers the inputs.

use std::collections::{HashMap, HashSet};

use super::compare::Unapplied;
use super::dlq::DeadDeduction;
use crate::domain::SkuId;

/// Values of a report line's `stuck_where`.
pub const IN_DLQ: &str = "dlq";
pub const IN_FLIGHT: &str = "in_flight";
pub const IN_DLQ_AND_FLIGHT: &str = "dlq+in_flight";
/// Every `stuck_where` value (the OpenAPI document lists the same).
pub const PLACES: [&str; 3] = [IN_DLQ, IN_FLIGHT, IN_DLQ_AND_FLIGHT];

/// Dead-lettered deductions per SKU: request id -> units.
pub type DeadLettered = HashMap<SkuId, HashMap<String, i64>>;

/// Groups a DLQ listing's deductions by SKU. An order's deduction stands
/// for every line of its order (it carries one line's, and names them all),
/// so each line counts under its own SKU: a SKU's line of a dead-lettered
/// order is stuck there too, not lost.
pub fn by_sku(deductions: &[DeadDeduction]) -> DeadLettered {
    let mut out = DeadLettered::new();
    for d in deductions {
        let lines: Vec<(u64, u32)> = match &d.order_lines {
            Some(lines) => lines.iter().map(|l| (l.sku_id, l.count)).collect(),
            None => vec![(d.sku_id, d.count)],
        };
        for (sku_id, count) in lines {
            let Ok(sku) = SkuId::new(sku_id) else {
                continue; // decoded deductions always carry a valid id
            };
            // One deduction dead-lettered twice (a duplicate) still holds its units once.
            out.entry(sku)
                .or_default()
                .insert(d.request_id.clone(), i64::from(count));
        }
    }
    out
}

/// Units of one SKU that are stuck, and where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stuck {
    pub units: i64,
    /// `dlq`, `in_flight`, or `dlq+in_flight`; `None` when nothing is stuck.
    pub place: Option<&'static str>,
}

/// What is stuck for one SKU: its dead-lettered units, plus the units of
/// unapplied reservations created more than `stuck_after_ms` before `now_ms`
/// that are not dead-lettered. Records without a created time (0) are not aged.
pub fn stuck(
    dead: Option<&HashMap<String, i64>>,
    unapplied: &[Unapplied],
    now_ms: u64,
    stuck_after_ms: u64,
) -> Stuck {
    let empty = HashMap::new();
    let dead = dead.unwrap_or(&empty);
    let dlq_units: i64 = dead.values().sum();
    let mut seen = HashSet::new();
    let old_units: i64 = unapplied
        .iter()
        .filter(|r| r.created_ms > 0 && now_ms.saturating_sub(r.created_ms) > stuck_after_ms)
        .filter(|r| !dead.contains_key(&r.request_id) && seen.insert(r.request_id.as_str()))
        .map(|r| r.count)
        .sum();
    let place = match (dlq_units > 0, old_units > 0) {
        (true, true) => Some(IN_DLQ_AND_FLIGHT),
        (true, false) => Some(IN_DLQ),
        (false, true) => Some(IN_FLIGHT),
        (false, false) => None,
    };
    Stuck {
        units: dlq_units + old_units,
        place,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, count: i64, created_ms: u64) -> Unapplied {
        Unapplied {
            request_id: id.into(),
            count,
            created_ms,
            status: crate::domain::ReservationStatus::Reserved,
        }
    }

    const BOUND_MS: u64 = 60_000;
    const NOW_MS: u64 = 1_000_000;

    fn dead(request_id: &str, sku_id: u64, count: u32) -> DeadDeduction {
        DeadDeduction {
            queue: super::super::dlq::DlqKind::Deduct,
            sku_id,
            request_id: request_id.into(),
            user_id: 1,
            count,
            created_ms: 1,
            expires_ms: 2,
            reason: "poison".into(),
            attempts: None,
            message_id: None,
            order_lines: None,
        }
    }

    #[test]
    fn a_dead_lettered_order_is_stuck_under_every_sku_of_its_lines() {
        use super::super::dlq::DeadOrderLine;
        let order = DeadDeduction {
            order_lines: Some(vec![
                DeadOrderLine {
                    sku_id: 1,
                    count: 1,
                },
                DeadOrderLine {
                    sku_id: 2,
                    count: 3,
                },
            ]),
            ..dead("o-1", 1, 1)
        };
        let grouped = by_sku(&[order, dead("r-1", 2, 2)]);
        let of = |n: u64| {
            grouped
                .get(&SkuId::new(n).unwrap())
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(of(1), HashMap::from([("o-1".to_string(), 1)]));
        assert_eq!(
            of(2),
            HashMap::from([("o-1".to_string(), 3), ("r-1".to_string(), 2)])
        );
    }

    #[test]
    fn young_in_flight_work_is_not_stuck_and_old_work_is() {
        let young = [record("a", 2, NOW_MS - 1_000)];
        assert_eq!(stuck(None, &young, NOW_MS, BOUND_MS), Stuck::default());
        let old = [
            record("a", 2, NOW_MS - 1_000),
            record("b", 3, NOW_MS - 61_000),
        ];
        assert_eq!(
            stuck(None, &old, NOW_MS, BOUND_MS),
            Stuck {
                units: 3,
                place: Some("in_flight")
            }
        );
    }

    #[test]
    fn a_dead_lettered_deduction_counts_once_under_dlq() {
        let dead: HashMap<String, i64> = [("b".to_string(), 3)].into();
        let old = [record("b", 3, NOW_MS - 61_000)];
        assert_eq!(
            stuck(Some(&dead), &old, NOW_MS, BOUND_MS),
            Stuck {
                units: 3,
                place: Some("dlq")
            }
        );
        let both = [
            record("b", 3, NOW_MS - 61_000),
            record("c", 1, NOW_MS - 90_000),
        ];
        assert_eq!(
            stuck(Some(&dead), &both, NOW_MS, BOUND_MS),
            Stuck {
                units: 4,
                place: Some("dlq+in_flight")
            }
        );
    }

    #[test]
    fn records_without_a_created_time_are_never_aged() {
        let unknown = [record("a", 2, 0)];
        assert_eq!(stuck(None, &unknown, NOW_MS, BOUND_MS), Stuck::default());
    }
}
