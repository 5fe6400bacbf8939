//! Local sold-out flags of one api process.
//!
//! A flag is trusted for at most `soldout.flag_ttl_ms` after it was last
//! validated against Redis; the subscriber re-validates flags well within that.
//! Pub/Sub is at-most-once, so a lost "available again" message can cause a
//! wrong refusal for at most the TTL — never a wrong acceptance, because a
//! flag is only ever set from Redis' own state.
//!
//! A flag belongs to a bucket *of one layout*: a re-split reuses the bucket
//! numbers (bucket 1 of 4 and bucket 1 of 2 are different stock), and it
//! empties the old buckets, raising their markers. So a flag keeps the layout
//! its marker was read under and refuses only requests routed by that same
//! layout; a flag of a layout that is gone refuses nobody.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::domain::{RequestId, SkuId, UserId};
use crate::redis::buckets::Layout;
use crate::redis::{RedisError, RedisStore};

struct Flag {
    validated_at: Instant,
    winners: Arc<HashSet<String>>,
    /// The layout the marker was read under (see the module doc).
    layout: Arc<Layout>,
}

impl Flag {
    /// Whether the flag speaks for `layout`'s bucket of the same number.
    fn of_layout(&self, layout: &Layout) -> bool {
        std::ptr::eq(&*self.layout, layout) || *self.layout == *layout
    }
}

pub struct SoldOutBoard {
    redis: Arc<RedisStore>,
    /// Keyed by SKU and bucket (bucket 0 for a SKU in one bucket): a split
    /// SKU's bucket is sold out on its own, for the buyers routed to it.
    flags: RwLock<HashMap<(SkuId, u16), Flag>>,
    refreshing: Mutex<HashSet<(SkuId, u16)>>,
    ttl: Duration,
    max_winners: usize,
    short_circuited: AtomicU64,
}

impl SoldOutBoard {
    pub fn new(redis: Arc<RedisStore>, ttl: Duration, max_winners: usize) -> Self {
        Self {
            redis,
            flags: RwLock::new(HashMap::new()),
            refreshing: Mutex::new(HashSet::new()),
            ttl,
            max_winners,
            short_circuited: AtomicU64::new(0),
        }
    }

    /// True when the request, routed by `layout` (the api's cached one), can
    /// be refused with `SOLD_OUT` without Redis: its bucket is flagged under
    /// that same layout, within the TTL, and the request did not win.
    pub fn short_circuits(&self, layout: &Layout, user: UserId, request: &RequestId) -> bool {
        let flags = self.flags.read().expect("lock poisoned");
        let Some(flag) = flags.get(&(layout.sku(), layout.bucket_of(user))) else {
            return false;
        };
        let fresh = flag.validated_at.elapsed() < self.ttl && flag.of_layout(layout);
        let refuse = fresh && !flag.winners.contains(request.as_str());
        if refuse {
            self.short_circuited.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("stockd_soldout_short_circuits_total").increment(1);
        }
        refuse
    }

    /// Requests this board refused locally (tests and diagnostics).
    pub fn short_circuited(&self) -> u64 {
        self.short_circuited.load(Ordering::Relaxed)
    }

    /// Whether the bucket is flagged under the SKU's cached layout (a flag of
    /// a layout that is gone does not count: the bucket is to be refreshed).
    pub fn is_bucket_flagged(&self, sku: SkuId, bucket: u16) -> bool {
        let Some(layout) = self.redis.buckets().cached_layout(sku) else {
            return false;
        };
        let flags = self.flags.read().expect("lock poisoned");
        flags
            .get(&(sku, bucket))
            .is_some_and(|f| f.validated_at.elapsed() < self.ttl && f.of_layout(&layout))
    }

    /// Whether any bucket of the SKU is flagged (the SKU's one bucket when
    /// it is not split).
    pub fn is_flagged(&self, sku: SkuId) -> bool {
        let flags = self.flags.read().expect("lock poisoned");
        flags
            .iter()
            .any(|((s, _), f)| *s == sku && f.validated_at.elapsed() < self.ttl)
    }

    pub fn clear(&self, sku: SkuId, bucket: u16) {
        self.flags
            .write()
            .expect("lock poisoned")
            .remove(&(sku, bucket));
    }

    pub fn clear_all(&self) {
        self.flags.write().expect("lock poisoned").clear();
    }

    pub fn flagged(&self) -> Vec<(SkuId, u16)> {
        self.flags
            .read()
            .expect("lock poisoned")
            .keys()
            .copied()
            .collect()
    }

    /// Reads the SKU's state in Redis and sets or clears its flag accordingly.
    /// Concurrent refreshes of one SKU collapse into one.
    pub async fn refresh(&self, sku: SkuId, bucket: u16) -> Result<(), RedisError> {
        let key = (sku, bucket);
        if !self.refreshing.lock().expect("lock poisoned").insert(key) {
            return Ok(());
        }
        let result = self.refresh_now(sku, bucket).await;
        self.refreshing.lock().expect("lock poisoned").remove(&key);
        result
    }

    /// Refreshes every bucket of the SKU.
    pub async fn refresh_sku(&self, sku: SkuId) -> Result<(), RedisError> {
        for bucket in self.redis.buckets().layout(sku).await?.buckets() {
            self.refresh(sku, bucket).await?;
        }
        Ok(())
    }

    async fn refresh_now(&self, sku: SkuId, bucket: u16) -> Result<(), RedisError> {
        let layout = self.redis.buckets().layout(sku).await?;
        if self.redis.skus().sold_out(sku, bucket).await? != Some(true) {
            self.clear(sku, bucket);
            return Ok(());
        }
        // The winners set only grows, so an unchanged size means an unchanged
        // set: re-validation of a flagged SKU then costs two O(1) reads.
        let known = self
            .flags
            .read()
            .expect("lock poisoned")
            .get(&(sku, bucket))
            .map(|f| f.winners.clone());
        let winners = match known {
            Some(w) if self.redis.skus().winners_count(sku, bucket).await? == w.len() => w,
            // Winners first, then the flag: no replay can be refused in between.
            _ => match self
                .redis
                .skus()
                .winners(sku, bucket, self.max_winners)
                .await?
            {
                Some(w) => Arc::new(w),
                None => {
                    self.clear(sku, bucket);
                    return Ok(());
                }
            },
        };
        // Re-check: a release between the two reads must not leave a stale flag.
        if self.redis.skus().sold_out(sku, bucket).await? != Some(true) {
            self.clear(sku, bucket);
            return Ok(());
        }
        // The reads above went through the layout cache: if it changed under
        // them (a re-split), the marker may be an old bucket's; flag nothing.
        if *layout != *self.redis.buckets().layout(sku).await? {
            self.clear(sku, bucket);
            return Ok(());
        }
        let flag = Flag {
            validated_at: Instant::now(),
            winners,
            layout,
        };
        self.flags
            .write()
            .expect("lock poisoned")
            .insert((sku, bucket), flag);
        Ok(())
    }
}
