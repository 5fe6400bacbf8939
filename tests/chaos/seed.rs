//! Seeds and the one random source of a scenario. The run seed comes from
//! `CHAOS_SEED` or the clock and is printed; each scenario derives its own from
//! it and its name, so `CHAOS_SEED=<n>` replays every scenario's buyers,
//! counts and timing jitter.

/// The run's base seed: `CHAOS_SEED`, or the clock — read once per test
/// process, so every scenario of one `make chaos` derives from the same value.
pub fn run_seed() -> u64 {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SEED.get_or_init(read_run_seed)
}

fn read_run_seed() -> u64 {
    match std::env::var("CHAOS_SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CHAOS_SEED={text:?} is not a u64")),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            // A short number is easier to copy from a log.
            nanos % 1_000_000_007
        }
    }
}

/// The scenario's seed: the run seed mixed with the scenario name (FNV-1a).
pub fn scenario_seed(run: u64, scenario: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in scenario.bytes() {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    run ^ hash
}

/// splitmix64: tiny, fast, and good enough to pick buyers and delays.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        assert!(lo <= hi, "empty range {lo}..={hi}");
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// A child generator (so one part's draws do not shift another's).
    pub fn fork(&mut self) -> Rng {
        Rng(self.next_u64())
    }

    /// `base_ms` plus up to `jitter_ms` of seeded jitter.
    pub fn jitter_ms(&mut self, base_ms: u64, jitter_ms: u64) -> std::time::Duration {
        std::time::Duration::from_millis(base_ms + self.range(0, jitter_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_numbers() {
        let mut a = Rng::new(scenario_seed(7, "s01"));
        let mut b = Rng::new(scenario_seed(7, "s01"));
        for _ in 0..100 {
            assert_eq!(a.range(1, 500), b.range(1, 500));
        }
        assert_ne!(scenario_seed(7, "s01"), scenario_seed(7, "s02"));
    }
}
