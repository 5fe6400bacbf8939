//! Refilling a bucket that ran dry: lease from the pool, and when the pool is
//! empty, reclaim from sibling buckets before calling the bucket drained.
//!
//! Single-flight per (SKU, bucket) and process: the requests that found the
//! bucket dry while one refill runs wait for it and retry their reservation,
//! instead of each leasing a chunk. Lease sizes shrink with the pool
//! (`pool / 2N`, at most `buckets.lease_max`), so the stock left in a bucket
//! no buyer routes to any more is small and is reclaimed at the end: a bucket
//! is drained (its buyers refused SOLD_OUT) only when the pool and every
//! sibling are empty and no transfer is in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::transfer::{count_round_trip, Holder, Take, Transferred};
use super::Layout;
use crate::domain::SkuId;
use crate::redis::{RedisError, RedisStore};

/// Lease-and-reclaim rounds one refill tries before giving up for now.
const ROUNDS: usize = 6;

/// Wait before looking again when transfers of the SKU are still in flight.
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(5);

#[derive(Default)]
pub struct RefillGates {
    gates: Mutex<HashMap<(SkuId, u16), Arc<Gate>>>,
}

#[derive(Default)]
struct Gate {
    /// Completed refills; a waiter that sees it moved retries without refilling.
    generation: AtomicU64,
    running: tokio::sync::Mutex<()>,
}

impl RefillGates {
    fn gate(&self, sku: SkuId, bucket: u16) -> Arc<Gate> {
        self.gates
            .lock()
            .expect("lock poisoned")
            .entry((sku, bucket))
            .or_default()
            .clone()
    }

    /// Read before a reservation attempt; pass it to [`RedisStore::refill`].
    pub fn generation(&self, sku: SkuId, bucket: u16) -> u64 {
        self.gate(sku, bucket).generation.load(Ordering::Acquire)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refill {
    /// Units moved into the bucket.
    Leased(i64),
    /// Another request refilled the bucket meanwhile.
    ByOther,
    /// Nothing left anywhere: the bucket is now drained.
    Drained,
    /// The layout changed under the caller.
    Layout,
    /// Stock kept moving; try again later.
    Busy,
}

impl RedisStore {
    /// Refills `bucket` for a request of `count` units that found it dry
    /// after reading `seen` from [`RefillGates::generation`].
    pub async fn refill(
        &self,
        layout: &Layout,
        bucket: u16,
        count: u32,
        seen: u64,
    ) -> Result<Refill, RedisError> {
        let gate = self.refills.gate(layout.sku(), bucket);
        let _running = gate.running.lock().await;
        if gate.generation.load(Ordering::Acquire) != seen {
            return Ok(Refill::ByOther);
        }
        let outcome = self.refill_now(layout, bucket, i64::from(count)).await;
        gate.generation.fetch_add(1, Ordering::AcqRel);
        let outcome = outcome?;
        let label = match outcome {
            Refill::Leased(_) => "leased",
            Refill::ByOther => "by_other",
            Refill::Drained => "drained",
            Refill::Layout => "layout",
            Refill::Busy => "busy",
        };
        metrics::counter!("stockd_bucket_refills_total", "result" => label).increment(1);
        Ok(outcome)
    }

    async fn refill_now(
        &self,
        layout: &Layout,
        bucket: u16,
        count: i64,
    ) -> Result<Refill, RedisError> {
        let lease = Take {
            min: count,
            max: self.lease_max,
            divisor: 2 * i64::from(layout.n()),
        };
        for _ in 0..ROUNDS {
            match self
                .transfer(layout, Holder::Pool, Holder::Bucket(bucket), lease)
                .await?
            {
                Transferred::Moved(units) => return Ok(Refill::Leased(units)),
                Transferred::Layout => return Ok(Refill::Layout),
                Transferred::Empty => {}
            }
            if self.reclaim(layout, Some(bucket)).await? > 0 {
                continue;
            }
            if self.transfers_pending(layout).await? {
                tokio::time::sleep(IN_FLIGHT_WAIT).await;
                continue;
            }
            self.set_drained(layout, bucket, true).await?;
            return Ok(Refill::Drained);
        }
        Ok(Refill::Busy)
    }

    /// Moves half of what each bucket other than `except` holds (at least one
    /// unit) back to the pool; returns the units moved.
    pub async fn reclaim(&self, layout: &Layout, except: Option<u16>) -> Result<i64, RedisError> {
        let half = Take {
            min: 1,
            max: i64::MAX / 4,
            divisor: 2,
        };
        let mut moved = 0;
        for sibling in layout.buckets().filter(|b| Some(*b) != except) {
            if let Transferred::Moved(units) = self
                .transfer(layout, Holder::Bucket(sibling), Holder::Pool, half)
                .await?
            {
                moved += units;
            }
        }
        Ok(moved)
    }

    /// Sets (or clears) a bucket's `drained` flag (see `drain.lua`).
    pub async fn set_drained(
        &self,
        layout: &Layout,
        bucket: u16,
        drained: bool,
    ) -> Result<(), RedisError> {
        let mut invocation = super::scripts::DRAIN.prepare_invoke();
        invocation
            .key(self.keys.sku_at(layout.tag(bucket)))
            .arg(if drained { "1" } else { "0" })
            .arg(layout.n())
            .arg(self.keys.soldout_channel())
            .arg(layout.event_subject(bucket));
        count_round_trip("drain");
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match reply.first().map(String::as_str) {
            Some("OK") | Some("LAYOUT") => Ok(()),
            _ => Err(RedisError::BadReply(format!("drain {reply:?}"))),
        }
    }
}
