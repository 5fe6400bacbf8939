//! The board of sale terms every api node keeps in memory (docs/contract.md
//! §19).
//!
//! A crowd arrives before a sale opens, and every early request that reached
//! Redis would spend a round trip on the busiest single-threaded server we
//! have to be told "not yet". Each api node keeps every SKU's terms (its
//! window, whether a pass is required) and answers `SALE_NOT_STARTED`,
//! `SALE_ENDED` and `PASS_REQUIRED` from memory. Memory never opens a sale:
//! within `sale.clock_margin_ms` of the opening the node asks Redis, whose
//! clock decides for every node, and the admission scripts judge the same
//! terms again from their mirror in the SKU hash (`lib/hold.lua`).
//!
//! - [`board`]: the terms per SKU (MySQL's, the source of truth).
//! - [`subscriber`]: keeps the board in step: a full read at start and after
//!   every (re)subscribe, a notice per changed SKU on the sold-out channel
//!   (`T:<sku>`; its own Pub/Sub connection, since the sold-out board may
//!   be off, and a SKU's terms are read from MySQL, not Redis), and a
//!   periodic full re-read as a safety net for a lost notice.

pub mod board;
pub mod subscriber;

pub use board::SaleBoard;
