//! "Is due" in SQL: the one statement of the expiry rule that MySQL runs,
//! beside its Rust twin `domain::is_due` (docs/architecture.md, "Where each
//! rule lives"). A `RESERVED` row is due for release from the millisecond
//! its `expires_at_ms` names on, by the clock the caller binds (now, or a
//! sweep's cutoff). Every statement that selects holds to release or counts those
//! overdue writes `{DUE}` in its text; a test holds the two statements of
//! the rule equal.

/// The predicate, with one placeholder for the clock in milliseconds.
pub const DUE: &str = "expires_at_ms <= ?";

#[cfg(test)]
mod tests {
    use super::DUE;
    use crate::domain::is_due;

    /// The SQL and the Rust statement of the rule agree at the boundary:
    /// a row whose time ends at the clock's millisecond is due.
    #[test]
    fn the_sql_predicate_is_the_domain_rule() {
        assert_eq!(DUE, "expires_at_ms <= ?");
        assert!(is_due(1_000, 1_000));
        assert!(is_due(999, 1_000));
        assert!(!is_due(1_001, 1_000));
    }
}
