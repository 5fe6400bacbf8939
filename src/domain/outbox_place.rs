//! Where a held deduction waits for the broker: an outbox stream entry and
//! the deduction's place among those that share it. A batch of reservations
//! admitted by one script call writes one entry for all of them (one `XADD`
//! and, once every one is confirmed, one id in the acker's `XDEL`), so each
//! deduction knows its index and how many share the entry; the entry may go
//! only when all of them are confirmed (outbox/acker.rs).

/// An outbox entry and the place of one deduction in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxPlace {
    /// The stream entry's id.
    pub entry_id: String,
    /// This deduction's index among the entry's, from 0.
    pub index: u16,
    /// How many deductions the entry carries (at least 1).
    pub of: u16,
}

impl OutboxPlace {
    /// The only deduction of its entry.
    pub fn alone(entry_id: String) -> Self {
        Self {
            entry_id,
            index: 0,
            of: 1,
        }
    }

    /// Whether the entry carries this deduction alone (removed on its own confirm).
    pub fn is_alone(&self) -> bool {
        self.of <= 1
    }
}
