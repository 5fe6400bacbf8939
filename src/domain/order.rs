//! An order: several SKUs reserved all-or-nothing for one buyer
//! (docs/architecture.md, "Orders"). Each line is held as a reservation of its SKU whose request id is the
//! order id, so every per-reservation mechanism (the Redis record, the
//! buyer's units, the ledger row, the finish mirror) serves a line as it is;
//! what makes them one order is that every line's deduction carries the whole
//! line list ([`Deduction::order`](super::Deduction)), so whoever holds one line
//! knows all of them, and the consumer applies them in one transaction.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{SkuId, COUNT_MAX};

/// Most lines an order may have whatever bound a caller gives (a bound on
/// one script call and on one transaction's locks).
pub const LINES_MAX: usize = 100;

/// One line of an order: a SKU and the units asked of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrderLine {
    pub sku_id: SkuId,
    pub count: u32,
}

/// An order's lines, sorted by SKU id: the one order in which every store
/// holds, locks and lists them (no two orders hold lines in opposite order).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Vec<OrderLine>", into = "Vec<OrderLine>")]
pub struct OrderLines(Vec<OrderLine>);

/// Why a line list is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinesError {
    #[error("an order has 1..={max} lines, not {got}")]
    Count { got: usize, max: usize },
    #[error("sku_id {0} appears on two lines")]
    Duplicate(SkuId),
    #[error("count of sku_id {0} must be in 1..={COUNT_MAX}")]
    Units(SkuId),
    #[error("malformed line list {0:?}")]
    Malformed(String),
}

impl OrderLines {
    /// Validates and sorts `lines`: 1..=`max` lines, distinct SKUs, each
    /// count in 1..=[`COUNT_MAX`].
    pub fn new(mut lines: Vec<OrderLine>, max: usize) -> Result<Self, LinesError> {
        if lines.is_empty() || lines.len() > max.min(LINES_MAX) {
            return Err(LinesError::Count {
                got: lines.len(),
                max: max.min(LINES_MAX),
            });
        }
        let mut seen = BTreeSet::new();
        for line in &lines {
            if !seen.insert(line.sku_id) {
                return Err(LinesError::Duplicate(line.sku_id));
            }
            if !(1..=COUNT_MAX).contains(&line.count) {
                return Err(LinesError::Units(line.sku_id));
            }
        }
        lines.sort();
        Ok(Self(lines))
    }

    pub fn lines(&self) -> &[OrderLine] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The line of `sku_id`, if the order has one.
    pub fn line_of(&self, sku_id: SkuId) -> Option<OrderLine> {
        self.0.iter().copied().find(|l| l.sku_id == sku_id)
    }

    /// The compact text form stored in Redis and MySQL: `sku:count,...`.
    pub fn encode(&self) -> String {
        self.to_string()
    }

    /// Parses [`Self::encode`]'s form.
    pub fn decode(text: &str) -> Result<Self, LinesError> {
        let bad = || LinesError::Malformed(text.to_string());
        let lines = text
            .split(',')
            .map(|part| {
                let (sku, count) = part.split_once(':').ok_or_else(bad)?;
                Ok(OrderLine {
                    sku_id: SkuId::parse(sku).map_err(|_| bad())?,
                    count: count.parse().map_err(|_| bad())?,
                })
            })
            .collect::<Result<Vec<_>, LinesError>>()?;
        Self::new(lines, LINES_MAX)
    }
}

impl fmt::Display for OrderLines {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{}", line.sku_id, line.count)?;
        }
        Ok(())
    }
}

impl TryFrom<Vec<OrderLine>> for OrderLines {
    type Error = LinesError;

    fn try_from(lines: Vec<OrderLine>) -> Result<Self, LinesError> {
        Self::new(lines, LINES_MAX)
    }
}

impl From<OrderLines> for Vec<OrderLine> {
    fn from(lines: OrderLines) -> Self {
        lines.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(sku: u64, count: u32) -> OrderLine {
        OrderLine {
            sku_id: SkuId::new(sku).unwrap(),
            count,
        }
    }

    #[test]
    fn lines_are_sorted_by_sku_and_round_trip_through_their_text() {
        let lines = OrderLines::new(vec![line(9, 1), line(2, 3)], 20).unwrap();
        assert_eq!(lines.lines(), &[line(2, 3), line(9, 1)]);
        assert_eq!(lines.encode(), "2:3,9:1");
        assert_eq!(OrderLines::decode("2:3,9:1").unwrap(), lines);
        assert_eq!(lines.line_of(SkuId::new(9).unwrap()), Some(line(9, 1)));
        let json = serde_json::to_string(&lines).unwrap();
        assert_eq!(serde_json::from_str::<OrderLines>(&json).unwrap(), lines);
    }

    #[test]
    fn empty_long_duplicate_and_out_of_range_line_lists_are_refused() {
        assert!(matches!(
            OrderLines::new(vec![], 20),
            Err(LinesError::Count { got: 0, max: 20 })
        ));
        let three = vec![line(1, 1), line(2, 1), line(3, 1)];
        assert!(matches!(
            OrderLines::new(three, 2),
            Err(LinesError::Count { got: 3, .. })
        ));
        assert!(matches!(
            OrderLines::new(vec![line(1, 1), line(1, 2)], 20),
            Err(LinesError::Duplicate(_))
        ));
        for count in [0, COUNT_MAX + 1] {
            assert!(matches!(
                OrderLines::new(vec![line(1, count)], 20),
                Err(LinesError::Units(_))
            ));
        }
        for text in ["", "1", "1:", "x:1", "1:1,1:1", "0:1"] {
            assert!(OrderLines::decode(text).is_err(), "{text:?}");
        }
    }
}
