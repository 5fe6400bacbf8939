//! `sale`: how an api node judges a SKU's sale window from memory, and how
//! long before an opening the reconciler warms the SKU (docs/contract.md
//! §19). The opening itself is Redis's to decide (its `TIME`, one clock for
//! every node); the clock keys bound what a node may answer without asking
//! it.

use serde::{Deserialize, Serialize};

use super::check;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SaleSettings {
    /// An api node answers `SALE_NOT_STARTED` from memory only while its
    /// clock is more than this many milliseconds before the opening; closer
    /// than that, Redis's clock decides. Covers the skew between the node's
    /// clock and Redis's.
    pub clock_margin_ms: u64,
    /// Milliseconds added to this node's clock where it judges a sale
    /// window (its board, the `Retry-After` of `SALE_NOT_STARTED`). For
    /// tests of skewed clocks only; 0 in every deployment.
    pub clock_offset_ms: i64,
    /// The reconciler warms a SKU (and checks it) once its opening is at
    /// most this many seconds away, so a Redis that lost or never had the
    /// SKU is found before the sale rather than by its first buyer. 0: no
    /// scheduled warm-up.
    pub warmup_lead_secs: u64,
}

impl Default for SaleSettings {
    fn default() -> Self {
        Self {
            clock_margin_ms: DEFAULT_CLOCK_MARGIN_MS,
            clock_offset_ms: 0,
            warmup_lead_secs: DEFAULT_WARMUP_LEAD_SECS,
        }
    }
}

/// One second: NTP keeps hosts well within it, and a buyer early by less
/// than that costs one Redis call.
pub const DEFAULT_CLOCK_MARGIN_MS: u64 = 1_000;

/// Largest margin or offset: a minute (a clock off by more is a broken host).
pub const SALE_CLOCK_MAX_MS: u64 = 60_000;

/// An hour: time for the warm-up to be retried over many passes, and for an
/// operator paged about it to act, before the opening.
pub const DEFAULT_WARMUP_LEAD_SECS: u64 = 3_600;

/// Longest lead: a week (a SKU is warmed again whenever Redis may have lost
/// it; warming a month ahead proves little about the day).
pub const WARMUP_LEAD_MAX_SECS: u64 = 7 * 24 * 3_600;

impl SaleSettings {
    pub fn validate(&self) -> anyhow::Result<()> {
        check::all(&[
            (
                self.clock_margin_ms <= SALE_CLOCK_MAX_MS,
                "sale.clock_margin_ms",
                "must be in 0..=60000",
            ),
            (
                self.clock_offset_ms.unsigned_abs() <= SALE_CLOCK_MAX_MS,
                "sale.clock_offset_ms",
                "must be in -60000..=60000",
            ),
            (
                self.warmup_lead_secs <= WARMUP_LEAD_MAX_SECS,
                "sale.warmup_lead_secs",
                "must be in 0..=604800 (0: no scheduled warm-up)",
            ),
        ])
    }

    /// This node's clock for sale windows: epoch milliseconds plus the
    /// test offset.
    pub fn now_ms(&self) -> i64 {
        crate::clock::unix_ms() as i64 + self.clock_offset_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_margin_or_offset_beyond_a_minute_or_a_lead_beyond_a_week_is_refused_by_name() {
        let mut s = SaleSettings::default();
        assert!(s.validate().is_ok());
        s.clock_offset_ms = -60_001;
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("sale.clock_offset_ms"), "{err}");
        s.clock_offset_ms = 0;
        s.clock_margin_ms = 60_001;
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("sale.clock_margin_ms"), "{err}");
        s.clock_margin_ms = 0;
        s.warmup_lead_secs = 0;
        assert!(s.validate().is_ok(), "0 turns the scheduled warm-up off");
        s.warmup_lead_secs = WARMUP_LEAD_MAX_SECS + 1;
        let err = s.validate().unwrap_err().to_string();
        assert!(err.contains("sale.warmup_lead_secs"), "{err}");
    }
}
