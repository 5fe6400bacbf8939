//! Refilling a bucket that ran dry: lease from the pool, and when the pool is
//! empty, reclaim from sibling buckets before calling the bucket drained.
//!
//! Single-flight per (SKU, bucket) and process: the requests that found the
//! bucket dry while one refill runs wait for it and retry their reservation,
//! instead of each leasing a chunk, and one lease brings what all of them
//! want. Lease sizes shrink with the pool (half of it, at most
//! `redis.bucket_lease_max` unless the waiters want more). When the pool is
//! empty, everything the siblings hold goes back to it first: a bucket is
//! drained (its buyers refused SOLD_OUT) only when the pool and every sibling
//! are empty and no transfer is in flight, at one instant (`quiet.rs`: a scan
//! slot by slot can miss units on the move), and that still holds once the
//! flag is set.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::quiet::Quiet;
use super::transfer::{count_round_trip, Holder, Take, Transferred};
use super::Buckets;
use super::Layout;
use crate::domain::SkuId;
use crate::redis::RedisError;

/// Lease-and-reclaim rounds one refill tries before giving up for now.
const ROUNDS: usize = 8;

/// A lease takes `pool / LEASE_DIVISOR` (bounded by `lease_max` and the
/// waiting demand): a bucket that runs dry is a bucket in demand, so it gets
/// half of what is left; the chunks halve as the pool empties, and whatever
/// a bucket still holds when buyers stop coming is reclaimed.
const LEASE_DIVISOR: i64 = 2;

/// Wait before looking again when transfers of the SKU are still in flight
/// (or the pool moved while the drain test read the slots).
const IN_FLIGHT_WAIT: Duration = Duration::from_millis(5);

#[derive(Default)]
pub struct RefillGates {
    gates: Mutex<HashMap<(SkuId, u16), Arc<Gate>>>,
}

#[derive(Default)]
struct Gate {
    /// Completed refills; a waiter that sees it moved retries without refilling.
    generation: AtomicU64,
    /// Units wanted by the requests in or waiting for the refill: a lease
    /// brings at least this much, so one refill serves every waiter instead
    /// of each winning or losing a race for a small chunk.
    demand: AtomicU64,
    /// What the latest refill ended in (read by the requests it served).
    last: Mutex<Option<Refill>>,
    /// The latest lease found the pool empty: no lease ahead of need until
    /// a refill leases again.
    pool_empty: std::sync::atomic::AtomicBool,
    /// The bucket ran dry at least once: it is in demand, so it leases ahead
    /// of need (a bucket whose few buyers its first lease serves does not
    /// take stock it will not sell).
    ran_dry: std::sync::atomic::AtomicBool,
    running: tokio::sync::Mutex<()>,
}

impl Refill {
    fn end(self) -> RefillEnd {
        match self {
            Self::Leased(_) => RefillEnd::Leased,
            Self::Drained { available } if available <= 0 => RefillEnd::SoldOut,
            _ => RefillEnd::Other,
        }
    }
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

    /// Read before a reservation attempt; pass it to [`Buckets::refill`].
    pub fn generation(&self, sku: SkuId, bucket: u16) -> u64 {
        self.gate(sku, bucket).generation.load(Ordering::Acquire)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refill {
    /// Units moved into the bucket.
    Leased(i64),
    /// Another request refilled the bucket meanwhile; what that refill did.
    ByOther(Option<RefillEnd>),
    /// Nothing left anywhere: the bucket is now drained; `available` is
    /// what it still held then (0: every buyer of it is refused SOLD_OUT).
    Drained { available: i64 },
    /// The layout changed under the caller.
    Layout,
    /// Stock kept moving; try again later.
    Busy,
}

/// How a completed refill ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefillEnd {
    Leased,
    /// Drained with nothing left in the bucket: SOLD_OUT for its buyers.
    SoldOut,
    Other,
}

impl Buckets {
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
        gate.ran_dry.store(true, Ordering::Release);
        gate.demand.fetch_add(u64::from(count), Ordering::AcqRel);
        let outcome = {
            let _running = gate.running.lock().await;
            if gate.generation.load(Ordering::Acquire) != seen {
                let last = *gate.last.lock().expect("lock poisoned");
                Ok(Refill::ByOther(last.map(|r| r.end())))
            } else {
                let demand = gate.demand.load(Ordering::Acquire).max(u64::from(count));
                let outcome = self
                    .refill_now(layout, bucket, i64::from(count), demand as i64)
                    .await;
                if let Ok(done) = &outcome {
                    gate.pool_empty
                        .store(!matches!(done, Refill::Leased(_)), Ordering::Release);
                }
                *gate.last.lock().expect("lock poisoned") = outcome.as_ref().ok().copied();
                gate.generation.fetch_add(1, Ordering::AcqRel);
                outcome
            }
        };
        gate.demand.fetch_sub(u64::from(count), Ordering::AcqRel);
        let outcome = outcome?;
        let label = match outcome {
            Refill::Leased(_) => "leased",
            Refill::ByOther(_) => "by_other",
            Refill::Drained { .. } => "drained",
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
        demand: i64,
    ) -> Result<Refill, RedisError> {
        // At least what the waiting requests want (all the pool has, if
        // less), else half the pool, at most `lease_max` unless the waiters
        // want more.
        let lease = Take {
            min: demand.max(count),
            max: self.lease_max.max(demand),
            divisor: LEASE_DIVISOR,
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
            match self.quiet_empty(layout, bucket).await? {
                Quiet::Empty => {}
                Quiet::Stock => continue,
                Quiet::Moving => {
                    tokio::time::sleep(IN_FLIGHT_WAIT).await;
                    continue;
                }
                Quiet::Layout => return Ok(Refill::Layout),
            }
            let available = self.set_drained(layout, bucket, true).await?;
            // Read again with the flag set: a release that put a unit in a
            // sibling before its rebalance could see the flag is seen here.
            match self.quiet_empty(layout, bucket).await? {
                Quiet::Empty => return Ok(Refill::Drained { available }),
                Quiet::Layout => return Ok(Refill::Layout),
                Quiet::Stock | Quiet::Moving => {
                    self.set_drained(layout, bucket, false).await?;
                }
            }
        }
        Ok(Refill::Busy)
    }

    /// Whether a bucket a reservation left with `left` units is worth a
    /// lease ahead of need: under a quarter of a full lease.
    pub fn runs_low(&self, left: u64) -> bool {
        left.saturating_mul(4) < self.lease_max as u64
    }

    /// Leases ahead of need for a bucket that [`Self::runs_low`]. One lease,
    /// skipped when a refill is running or the pool answered empty last time;
    /// never reclaims or drains (that is for a bucket that actually ran dry).
    pub async fn refill_ahead(&self, layout: &Layout, bucket: u16) {
        let gate = self.refills.gate(layout.sku(), bucket);
        if gate.pool_empty.load(Ordering::Acquire) || !gate.ran_dry.load(Ordering::Acquire) {
            return;
        }
        let Ok(_running) = gate.running.try_lock() else {
            return;
        };
        let lease = Take {
            min: 1,
            max: self.lease_max,
            divisor: LEASE_DIVISOR,
        };
        match self
            .transfer(layout, Holder::Pool, Holder::Bucket(bucket), lease)
            .await
        {
            Ok(Transferred::Moved(units)) => {
                // Before the generation moves: a request that waited sees
                // this lease, not an older refill's outcome.
                *gate.last.lock().expect("lock poisoned") = Some(Refill::Leased(units));
                gate.generation.fetch_add(1, Ordering::AcqRel);
                metrics::counter!("stockd_bucket_refills_total", "result" => "ahead").increment(1);
            }
            Ok(_) => gate.pool_empty.store(true, Ordering::Release),
            Err(err) => tracing::debug!(error = %err, "buckets.refill_ahead: failed"),
        }
    }

    /// Moves back to the pool everything each bucket other than `except`
    /// holds (every bucket with `None`; a missing bucket hash holds nothing);
    /// returns the units moved. The bucket asking is the one in demand; a
    /// sibling that is too leases back what it needs.
    pub async fn reclaim(&self, layout: &Layout, except: Option<u16>) -> Result<i64, RedisError> {
        let all = Take {
            min: 1,
            max: i64::MAX / 4,
            divisor: 1,
        };
        let mut moved = 0;
        for sibling in layout.buckets().filter(|b| Some(*b) != except) {
            if let Transferred::Moved(units) = self
                .transfer(layout, Holder::Bucket(sibling), Holder::Pool, all)
                .await?
            {
                moved += units;
            }
        }
        Ok(moved)
    }

    /// Sets (or clears) a bucket's `drained` flag (see `drain.lua`); returns
    /// what the bucket holds (0 for a missing bucket hash).
    pub async fn set_drained(
        &self,
        layout: &Layout,
        bucket: u16,
        drained: bool,
    ) -> Result<i64, RedisError> {
        let mut invocation = crate::redis::scripts::DRAIN.prepare_invoke();
        invocation
            .key(self.core.keys.sku_at(layout.tag(bucket)))
            .arg(if drained { "1" } else { "0" })
            .arg(layout.n())
            .arg(self.core.keys.soldout_channel())
            .arg(layout.event_subject(bucket));
        count_round_trip("drain");
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match reply.first().map(String::as_str) {
            Some("OK") => Ok(reply.get(1).and_then(|v| v.parse().ok()).unwrap_or(0)),
            Some("LAYOUT") => Ok(0),
            _ => Err(RedisError::BadReply(format!("drain {reply:?}"))),
        }
    }
}
