//! Whether a split SKU's stock is gone from everywhere a dry bucket could get
//! it: the test a refill passes before it drains the bucket (its buyers are
//! refused SOLD_OUT from then on).
//!
//! No read spans slots, and a transfer's steps run in two slots, so reading
//! the pool, then each sibling, then the pending transfers one after the
//! other can see all of them empty while units are on the move: a sibling's
//! lease debited from the pool before the pool was read and credited to the
//! sibling after the sibling was read, settled before the pending check; or
//! another refill's reclaim credited to the pool after the pool was read.
//! That was the undersell of the issue "a split SKU strands stock under
//! contention" (docs/architecture.md, "Stock buckets").
//!
//! So the home slot is read twice, around one read of every bucket, each
//! read atomic in its slot (`stock_probe.lua`): stock is gone when both home
//! reads show an empty pool with the same `pool_moves` (every debit from and
//! credit to the pool counts one), every sibling was empty, and no slot had a
//! transfer out pending. Every transfer has one step in the home slot (a
//! lease's debit, a give's credit): one that took it between the home reads
//! changed `pool_moves`; a lease debited before the first read was pending
//! there unless already credited, and then its bucket's read saw the units;
//! a give pending in its source when that was read is seen there, and one
//! debited later moved units that reached the source after its read, by a
//! lease seen as above. So a test that passes saw an instant with nothing to
//! lease or reclaim anywhere but in the asking bucket; only a release or a
//! restock brings stock back after it (the refill's second test, once the
//! flag is set, covers a release racing the drain).

use super::transfer::count_round_trip;
use super::Buckets;
use super::Layout;
use crate::redis::{scripts, RedisError};

/// What the double read found, for the bucket that asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiet {
    /// Nothing in the pool or any sibling, nothing in flight: drain.
    Empty,
    /// The pool or a sibling holds units: lease or reclaim them.
    Stock,
    /// Transfers pending, or the pool moved during the reads: look again.
    Moving,
    /// The layout changed under the caller.
    Layout,
}

/// One slot at one instant.
#[derive(Debug, Clone, Copy)]
struct Probe {
    available: i64,
    pool: i64,
    pool_moves: i64,
    pending: u64,
}

impl Buckets {
    /// The double read described above, for a refill of `asking` (its own
    /// stock does not count: it sells that itself).
    pub(super) async fn quiet_empty(
        &self,
        layout: &Layout,
        asking: u16,
    ) -> Result<Quiet, RedisError> {
        let Some(first) = self.probe(layout, 0).await? else {
            return Ok(Quiet::Layout);
        };
        if first.pool > 0 {
            return Ok(Quiet::Stock);
        }
        let mut stock = false;
        let mut moving = first.pending > 0;
        for bucket in layout.buckets().skip(1) {
            let Some(seen) = self.probe(layout, bucket).await? else {
                return Ok(Quiet::Layout);
            };
            stock |= bucket != asking && seen.available > 0;
            moving |= seen.pending > 0;
        }
        let Some(last) = self.probe(layout, 0).await? else {
            return Ok(Quiet::Layout);
        };
        stock |= last.pool > 0 || (asking != 0 && last.available > 0);
        moving |= last.pending > 0 || last.pool_moves != first.pool_moves;
        Ok(if stock {
            Quiet::Stock
        } else if moving {
            Quiet::Moving
        } else {
            Quiet::Empty
        })
    }

    /// `None`: the bucket's hash says another layout.
    async fn probe(&self, layout: &Layout, bucket: u16) -> Result<Option<Probe>, RedisError> {
        let tag = layout.tag(bucket);
        let mut invocation = scripts::STOCK_PROBE.prepare_invoke();
        invocation
            .key(self.core.keys.sku_at(tag))
            .key(self.core.keys.transfers_out_at(tag))
            .arg(layout.n());
        count_round_trip("probe");
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        let num = |i: usize| reply.get(i).and_then(|v| v.parse::<i64>().ok());
        match reply.first().map(String::as_str) {
            Some("OK") => match (num(1), num(2), num(3), num(4)) {
                (Some(available), Some(pool), Some(pool_moves), Some(pending)) => Ok(Some(Probe {
                    available,
                    pool,
                    pool_moves,
                    pending: pending.max(0) as u64,
                })),
                _ => Err(RedisError::BadReply(format!("probe {reply:?}"))),
            },
            Some("LAYOUT") => Ok(None),
            _ => Err(RedisError::BadReply(format!("probe {reply:?}"))),
        }
    }
}
