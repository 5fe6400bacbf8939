//! The deadline a duplicate is told again with: what its first telling
//! said, before any extension moved it. A single reservation's ledger row
//! (`apply.rs`) and an order's `orders` row (`apply_order.rs`) answer it
//! by the same rule.

use crate::domain::Deduction;

/// The row's deadline when it was first told: its own before any extension;
/// after one, the deadline of the message when the message is the deduction
/// that made the row (same admission time). `None`: unknown (an extended
/// row met by a readmission's message, whose own first telling was the
/// original deduction's) — nothing is told again rather than another body.
/// `row` is the row's (extensions, created, expires): a reservation's ledger
/// row or an order's `orders` row.
pub(super) fn first_expiry(
    (extensions, created_ms, expires_ms): (u32, u64, u64),
    msg: &Deduction,
) -> Option<u64> {
    if extensions == 0 {
        Some(expires_ms)
    } else if created_ms == msg.created_ms {
        Some(msg.expires_ms)
    } else {
        None
    }
}
