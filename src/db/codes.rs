//! MySQL/MariaDB server error codes stockd reacts to.

/// Duplicate key: a second writer of the same idempotency key.
pub const ER_DUP_ENTRY: u16 = 1062;
/// Deadlock found when trying to get lock; the transaction was rolled back.
pub const ER_LOCK_DEADLOCK: u16 = 1213;
/// Lock wait timeout exceeded.
pub const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;
/// Unknown database (the target of `stockd migrate` does not exist yet).
pub const ER_BAD_DB_ERROR: u16 = 1049;

/// Errors a statement gets because of the values it carries: retrying the same
/// message later cannot succeed, so these count as the message's own failure.
/// 1048 column cannot be null, 1264 out of range, 1265 data truncated, 1292
/// incorrect value, 1366 incorrect value for column, 1406 data too long, 1452
/// foreign key, 3819 / 4025 CHECK constraint violated (MySQL / MariaDB).
pub const DATA_ERRORS: [u16; 9] = [1048, 1264, 1265, 1292, 1366, 1406, 1452, 3819, 4025];
