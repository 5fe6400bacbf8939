//! The bound on a SKU's stock: one number the admin `PUT` (a total) and an
//! adjustment (a delta) both answer to, so no path takes a SKU where the
//! other would refuse to go.

/// Largest stock one SKU may hold (10^12): keeps every sum of units (a
/// total plus a delta, the counters in Redis, which Lua holds as doubles
/// exact to 2^53) far from overflow.
pub const TOTAL_STOCK_MAX: i64 = 1_000_000_000_000;

/// The total after adding `delta` to `total`, or `None` when it would pass
/// [`TOTAL_STOCK_MAX`] (a total below zero is the caller's rule to judge:
/// what is reserved bounds it from below).
pub fn total_within_cap(total: i64, delta: i64) -> Option<i64> {
    total
        .checked_add(delta)
        .filter(|after| *after <= TOTAL_STOCK_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_total_up_to_the_cap_is_allowed_and_past_it_refused() {
        assert_eq!(
            total_within_cap(TOTAL_STOCK_MAX - 2, 2),
            Some(TOTAL_STOCK_MAX)
        );
        assert_eq!(total_within_cap(TOTAL_STOCK_MAX - 2, 3), None);
        assert_eq!(
            total_within_cap(TOTAL_STOCK_MAX, -1),
            Some(TOTAL_STOCK_MAX - 1)
        );
        assert_eq!(total_within_cap(i64::MAX, 1), None);
    }
}
