//! MySQL/MariaDB server error codes stockd reacts to.

/// Duplicate key: a second writer of the same idempotency key.
pub const ER_DUP_ENTRY: u16 = 1062;
/// Deadlock found when trying to get lock; the transaction was rolled back.
pub const ER_LOCK_DEADLOCK: u16 = 1213;
/// Lock wait timeout exceeded.
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// Unknown database (the target of `stockd migrate` does not exist yet).
pub const ER_BAD_DB_ERROR: u16 = 1049;
