//! The per-IP rate limit (`limits.per_ip_*`): a token bucket per client IP,
//! kept in this api process and checked before any Redis call, so a flooding
//! host costs stockd a hash lookup per request and Redis nothing.
//!
//! Memory is bounded: at most [`TRACKED_IPS_MAX`] addresses. When the table is
//! full, buckets that have refilled (their IP went quiet) are forgotten first;
//! if every tracked IP is still active, the oldest half is forgotten — those
//! IPs start again with a full bucket, which errs towards admitting. Buckets
//! are sharded so concurrent requests rarely share a lock.
//!
//! The bucket table is generic over its key: the per-client limit
//! (`limits.per_client_*`, `auth/`) is the same limiter keyed by client.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most client IPs tracked per process (~100 bytes each: ~10 MB at most).
pub const TRACKED_IPS_MAX: usize = 100_000;
/// Lock shards.
const SHARDS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets keyed by `K` (a client IP, a configured client).
pub struct RateLimiter<K> {
    per_second: f64,
    burst: f64,
    shards: Vec<Mutex<HashMap<K, Bucket>>>,
}

/// The per-IP limit.
pub type IpLimiter = RateLimiter<IpAddr>;

impl<K: Hash + Eq + Copy> RateLimiter<K> {
    /// `per_second` 0 turns the limit off.
    pub fn new(per_second: f64, burst: u32) -> Self {
        Self {
            per_second,
            burst: f64::from(burst),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    pub fn is_on(&self) -> bool {
        self.per_second > 0.0
    }

    /// Spends one token of `key`; `Err(wait)` when none is left.
    pub fn check(&self, key: K, now: Instant) -> Result<(), Duration> {
        if !self.is_on() {
            return Ok(());
        }
        let mut shard = self.shards[shard_of(key)].lock().expect("lock poisoned");
        if shard.len() >= TRACKED_IPS_MAX / SHARDS && !shard.contains_key(&key) {
            self.forget_some(&mut shard, now);
        }
        let bucket = shard.entry(key).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.per_second).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - bucket.tokens) / self.per_second,
            ))
        }
    }

    fn forget_some(&self, shard: &mut HashMap<K, Bucket>, now: Instant) {
        let full_after = self.burst / self.per_second;
        shard.retain(|_, b| now.saturating_duration_since(b.at).as_secs_f64() < full_after);
        if shard.len() >= TRACKED_IPS_MAX / SHARDS {
            let mut ages: Vec<Instant> = shard.values().map(|b| b.at).collect();
            ages.sort();
            let cutoff = ages[ages.len() / 2];
            shard.retain(|_, b| b.at > cutoff);
        }
    }

    /// IPs tracked now (for tests and a gauge).
    pub fn tracked(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().expect("lock poisoned").len())
            .sum()
    }
}

fn shard_of<K: Hash>(key: K) -> usize {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    (hasher.finish() as usize) % SHARDS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let limiter = IpLimiter::new(2.0, 3);
        let ip: IpAddr = "198.51.100.1".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.check(ip, t0).is_ok());
        }
        let wait = limiter.check(ip, t0).unwrap_err();
        assert!(wait <= Duration::from_millis(500), "{wait:?}");
        assert!(limiter.check(ip, t0 + Duration::from_millis(500)).is_ok());
        let other: IpAddr = "198.51.100.2".parse().unwrap();
        assert!(
            limiter.check(other, t0).is_ok(),
            "IPs do not share a bucket"
        );
    }

    #[test]
    fn memory_stays_bounded_however_many_ips_arrive() {
        let limiter = IpLimiter::new(1.0, 5);
        let t0 = Instant::now();
        for i in 0..(TRACKED_IPS_MAX as u32 + 50_000) {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let _ = limiter.check(ip, t0 + Duration::from_micros(u64::from(i)));
        }
        assert!(
            limiter.tracked() <= TRACKED_IPS_MAX,
            "{}",
            limiter.tracked()
        );
    }

    #[test]
    fn off_admits_everything() {
        let limiter = IpLimiter::new(0.0, 0);
        let ip: IpAddr = "::1".parse().unwrap();
        for _ in 0..1000 {
            assert!(limiter.check(ip, Instant::now()).is_ok());
        }
    }
}
