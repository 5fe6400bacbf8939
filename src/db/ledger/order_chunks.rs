//! A batch with orders is applied in several transactions, each with at most
//! [`ORDER_LINES_PER_TX`] order lines. Why: when an order was fitted line by
//! line (a handful of statements per line), a full batch of 3-line orders
//! (a thousand messages, three thousand lines) was some ten thousand
//! statements in one transaction, longer than `mysql.query_timeout_ms`
//! bounds a transaction: the bench's `orders` phase timed such a batch out
//! on every retry, the breaker opened, and the consumer never got past it.
//! The fit is set-based now (`apply_order::apply_orders`: a few statements
//! per SKU and transaction), and the bound still keeps each transaction's
//! inserts and held locks near a batch of single reservations' whatever
//! the batch size.
//!
//! Safe to cut anywhere between messages: every message is applied in the
//! transaction of its chunk, and a delivery redelivered after a later
//! chunk failed finds the earlier chunks' rows and orders already there
//! (duplicates, the ledger's idempotency).

use super::BatchReport;
use crate::domain::Deduction;

/// Most order lines one transaction of the consumer applies: a multi-row
/// insert's worth of ledger rows (`INSERT_CHUNK_ROWS` is 500).
pub const ORDER_LINES_PER_TX: usize = 480;

/// The batch cut into runs of whole messages, each run with at most
/// `max_lines` order lines (a single order with more lines gets a run of its
/// own). A batch of single reservations only is one run: their apply is
/// per SKU and does not grow with the messages.
pub(super) fn split(batch: &[Deduction], max_lines: usize) -> Vec<&[Deduction]> {
    let mut runs = Vec::new();
    let (mut start, mut lines) = (0, 0);
    for (i, msg) in batch.iter().enumerate() {
        let here = msg.order.as_ref().map_or(0, |o| o.len());
        if lines + here > max_lines && i > start {
            runs.push(&batch[start..i]);
            (start, lines) = (i, 0);
        }
        lines += here;
    }
    if start < batch.len() {
        runs.push(&batch[start..]);
    }
    runs
}

impl BatchReport {
    /// Adds what another transaction of the same batch did.
    pub(super) fn absorb(&mut self, other: BatchReport) {
        self.applied += other.applied;
        self.duplicates += other.duplicates;
        self.rejected.extend(other.rejected);
        self.readmitted.extend(other.readmitted);
        self.foreign.extend(other.foreign);
        self.told.extend(other.told);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{OrderLine, OrderLines, RequestId, SkuId, UserId};

    fn msg(id: &str, order_lines: usize) -> Deduction {
        let order = (order_lines > 0).then(|| {
            let lines = (1..=order_lines as u64)
                .map(|sku| OrderLine {
                    sku_id: SkuId::new(sku).unwrap(),
                    count: 1,
                })
                .collect();
            OrderLines::new(lines, 100).unwrap()
        });
        Deduction {
            request_id: RequestId::parse(id).unwrap(),
            sku_id: SkuId::new(1).unwrap(),
            user_id: UserId::new(1).unwrap(),
            count: 1,
            created_ms: 1,
            expires_ms: 2,
            order,
            client: None,
        }
    }

    fn ids(runs: &[&[Deduction]]) -> Vec<Vec<String>> {
        runs.iter()
            .map(|r| r.iter().map(|m| m.request_id.to_string()).collect())
            .collect()
    }

    #[test]
    fn singles_stay_one_run_and_orders_are_cut_between_messages() {
        let singles: Vec<_> = (0..5).map(|i| msg(&format!("s{i}"), 0)).collect();
        assert_eq!(split(&singles, 4).len(), 1);
        let batch = vec![
            msg("a", 3),
            msg("s1", 0),
            msg("b", 3),
            msg("c", 2),
            msg("d", 5),
        ];
        assert_eq!(
            ids(&split(&batch, 6)),
            [vec!["a", "s1", "b"], vec!["c"], vec!["d"]]
        );
        // Every message exactly once, in order.
        let flat: Vec<String> = split(&batch, 6)
            .concat()
            .iter()
            .map(|m| m.request_id.to_string())
            .collect();
        assert_eq!(flat, ["a", "s1", "b", "c", "d"]);
        assert!(split(&[], 6).is_empty());
    }

    #[test]
    fn reports_add_up() {
        let mut total = BatchReport {
            applied: 2,
            duplicates: 1,
            ..Default::default()
        };
        total.absorb(BatchReport {
            applied: 3,
            rejected: vec![(msg("x", 0), "OVER_ADMITTED")],
            ..Default::default()
        });
        assert_eq!(
            (total.applied, total.duplicates, total.rejected.len()),
            (5, 1, 1)
        );
    }
}
