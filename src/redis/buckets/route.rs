//! Which bucket a buyer's reservations of a split SKU live in.
//!
//! The buyer's counter, reservation records and the stock decrement must sit
//! in one script for the per-buyer limit and replay to stay exact, so a buyer
//! is pinned to one bucket by a hash of the user id. The id is mixed first
//! (splitmix64's finaliser): a raw `id % n` would send sequential or
//! patterned ids (every shop's test accounts, even ids only) to one bucket.

/// The bucket (`0..n`) of `user_id` in a SKU split into `n` buckets.
pub fn bucket_of(user_id: u64, n: u16) -> u16 {
    if n <= 1 {
        return 0;
    }
    (mix64(user_id) % u64::from(n)) as u16
}

/// splitmix64's step and output function: a bijection on u64 whose every
/// output bit depends on every input bit (`mix64(s)` is the generator's next
/// value from state `s`).
pub fn mix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bucket_takes_every_buyer() {
        for user in [1, 2, 99, u64::MAX] {
            assert_eq!(bucket_of(user, 1), 0);
            assert_eq!(bucket_of(user, 0), 0);
        }
    }

    #[test]
    fn sequential_ids_spread_evenly() {
        let n = 3;
        let mut seen = [0u32; 3];
        for user in 1..=30_000 {
            let b = bucket_of(user, n);
            assert!(b < n);
            seen[b as usize] += 1;
        }
        for count in seen {
            assert!((9_000..=11_000).contains(&count), "{seen:?}");
        }
    }

    #[test]
    fn even_ids_do_not_collapse_into_one_bucket() {
        let mut seen = [0u32; 2];
        for user in (2..=20_000).step_by(2) {
            seen[bucket_of(user, 2) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 4_000), "{seen:?}");
    }
}
