//! One Redis step of a stock movement (`ops/stock_step.rs`): what it asks of
//! `load_sku.lua` and what it found. The SKU's load (`sku.rs`) and a split
//! SKU's cut (`sku_split_cut.rs`) both answer a [`LoadOutcome`].

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadOutcome {
    Loaded {
        available: i64,
    },
    /// A negative delta would take Redis below zero: units are already promised.
    BelowReserved {
        available: i64,
    },
    /// The SKU is loaded with another bucket count (re-split it first).
    Layout,
    /// A move of a SKU Redis does not hold: only warm-up loads it.
    NotLoaded,
    /// The movement was counted by a warm-up already: nothing moved.
    Included,
}

/// How a stock step may meet a SKU Redis does not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// A new SKU: nothing of its buyers can exist, so it is loaded.
    Create,
    /// Any other: answered `NotLoaded` (warm-up brings the buyer state back).
    Move,
}

/// One Redis step of a stock movement (`ops/stock_step.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// The step's id: its marker makes a second run answer the first.
    pub op: &'a str,
    pub mode: LoadMode,
    /// The movement applied; 0 for a cut taken before its commit.
    pub movement_id: u64,
    /// A cut taken before its commit is recorded until settled.
    pub record_cut: bool,
}
