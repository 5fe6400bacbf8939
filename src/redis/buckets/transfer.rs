//! Moving stock between the pool and a bucket of a split SKU.
//!
//! The pool and the buckets live in different slots (on a cluster, on
//! different primaries), so no script can move units between them atomically.
//! A transfer is three steps, each atomic in its own slot:
//! 1. debit the source and record the transfer as pending in its `xout` hash;
//! 2. credit the destination once per transfer id (its `xin` set);
//! 3. settle: remove the pending entry.
//!
//! A unit is always in exactly one place the reconciler can count: the source,
//! a pending entry not yet credited, or the destination. A caller that dies
//! between the steps leaves a pending entry, which the reconciler finishes
//! (`ops/rebalance.rs`): credit (a no-op if it was done) then settle.

use deadpool_redis::redis;

use super::Buckets;
use super::Layout;
use crate::redis::{scripts, RedisError};

/// How long a slot remembers the ids credited to it (7 days, refreshed by
/// every credit): far longer than a pending transfer waits for the
/// reconciler (one pass). The reconciler never credits a transfer older than
/// [`CREDIT_HORIZON_SECS`], so a forgotten id cannot be credited twice.
const CREDITED_IDS_TTL_MS: u64 = 7 * 24 * 3_600_000;

/// Oldest pending transfer the reconciler still finishes on its own; an older
/// one (the reconciler was down for days) is left to the operator.
pub const CREDIT_HORIZON_SECS: u64 = 6 * 24 * 3600;

/// Where stock of a split SKU sits: the pool (in bucket 0's hash) or a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Holder {
    Pool,
    Bucket(u16),
}

impl Holder {
    /// The bucket whose hash holds it.
    pub fn bucket(self) -> u16 {
        match self {
            Self::Pool => 0,
            Self::Bucket(b) => b,
        }
    }

    fn field(self) -> &'static str {
        match self {
            Self::Pool => "pool",
            Self::Bucket(_) => "available",
        }
    }

    /// How a pending entry names its destination: `p` or the bucket number.
    pub fn code(self) -> String {
        match self {
            Self::Pool => "p".into(),
            Self::Bucket(b) => b.to_string(),
        }
    }

    pub fn parse(code: &str) -> Option<Self> {
        match code {
            "p" => Some(Self::Pool),
            b => b.parse().ok().map(Self::Bucket),
        }
    }
}

/// How much a debit takes: `floor(value / divisor)` bounded to `min..=max`,
/// and never more than the source holds.
#[derive(Debug, Clone, Copy)]
pub struct Take {
    pub min: i64,
    pub max: i64,
    pub divisor: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transferred {
    Moved(i64),
    /// The source had nothing to give.
    Empty,
    /// The layout changed under the caller.
    Layout,
}

/// A stock transfer recorded in its source's `xout` hash (`dest:units:secs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTransfer {
    pub id: String,
    pub dest: Holder,
    pub units: i64,
    /// When the debit ran (Redis TIME, seconds).
    pub at_secs: u64,
}

impl PendingTransfer {
    pub(crate) fn parse(id: &str, entry: &str) -> Option<Self> {
        let mut parts = entry.split(':');
        let dest = Holder::parse(parts.next()?)?;
        let units = parts.next()?.parse().ok()?;
        let at_secs = parts.next()?.parse().ok()?;
        Some(Self {
            id: id.to_string(),
            dest,
            units,
            at_secs,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credited {
    Applied,
    Already,
    /// The destination hash does not exist; the transfer stays pending.
    Missing,
}

impl Buckets {
    /// Runs a whole transfer (debit, credit, settle). Every call counts in
    /// `stockd_bucket_round_trips_total`.
    pub async fn transfer(
        &self,
        layout: &Layout,
        from: Holder,
        to: Holder,
        take: Take,
    ) -> Result<Transferred, RedisError> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let tag = layout.tag(from.bucket());
        let mut debit = scripts::TRANSFER_DEBIT.prepare_invoke();
        debit
            .key(self.core.keys.sku_at(tag))
            .key(self.core.keys.transfers_out_at(tag))
            .arg(from.field())
            .arg(layout.n())
            .arg(take.min)
            .arg(take.max)
            .arg(take.divisor.max(1))
            .arg(&id)
            .arg(to.code())
            .arg(self.core.keys.soldout_channel())
            .arg(layout.event_subject(from.bucket()));
        count_round_trip("debit");
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { debit.invoke_async(&mut c).await })
            .await?;
        let units = match reply.first().map(String::as_str) {
            Some("OK") => reply
                .get(1)
                .and_then(|v| v.parse::<i64>().ok())
                .ok_or_else(|| RedisError::BadReply(format!("debit {reply:?}")))?,
            Some("EMPTY") => return Ok(Transferred::Empty),
            Some("LAYOUT") => return Ok(Transferred::Layout),
            _ => return Err(RedisError::BadReply(format!("debit {reply:?}"))),
        };
        match self.credit(layout, to, &id, units).await? {
            Credited::Applied | Credited::Already => self.settle(layout, from, &id).await?,
            // Left pending: the reconciler credits it once the hash is back.
            Credited::Missing => return Ok(Transferred::Layout),
        }
        Ok(Transferred::Moved(units))
    }

    /// Step 2: credits `units` to `to` once per transfer id.
    pub async fn credit(
        &self,
        layout: &Layout,
        to: Holder,
        id: &str,
        units: i64,
    ) -> Result<Credited, RedisError> {
        let tag = layout.tag(to.bucket());
        let mut credit = scripts::TRANSFER_CREDIT.prepare_invoke();
        credit
            .key(self.core.keys.sku_at(tag))
            .key(self.core.keys.transfers_in_at(tag))
            .arg(to.field())
            .arg(id)
            .arg(units)
            .arg(CREDITED_IDS_TTL_MS)
            .arg(self.core.keys.soldout_channel())
            .arg(layout.event_subject(to.bucket()));
        count_round_trip("credit");
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { credit.invoke_async(&mut c).await })
            .await?;
        match reply.first().map(String::as_str) {
            Some("APPLIED") => Ok(Credited::Applied),
            Some("ALREADY") => Ok(Credited::Already),
            Some("MISSING") => Ok(Credited::Missing),
            _ => Err(RedisError::BadReply(format!("credit {reply:?}"))),
        }
    }

    /// Step 3: forgets a transfer whose credit is done.
    pub async fn settle(&self, layout: &Layout, from: Holder, id: &str) -> Result<(), RedisError> {
        let key = self.core.keys.transfers_out_at(layout.tag(from.bucket()));
        count_round_trip("settle");
        self.core
            .run(|mut c| async move {
                redis::cmd("HDEL")
                    .arg(&key)
                    .arg(id)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map(|_| ())
    }
}

/// One extra Redis call made because the SKU is split.
pub(crate) fn count_round_trip(step: &'static str) {
    metrics::counter!("stockd_bucket_round_trips_total", "step" => step).increment(1);
}

impl Buckets {
    /// The transfers out of `bucket` not yet settled.
    pub async fn pending_transfers(
        &self,
        layout: &Layout,
        bucket: u16,
    ) -> Result<Vec<PendingTransfer>, RedisError> {
        let key = self.core.keys.transfers_out_at(layout.tag(bucket));
        let raw: Vec<(String, String)> = self
            .core
            .run(|mut c| async move { redis::cmd("HGETALL").arg(&key).query_async(&mut c).await })
            .await?;
        raw.iter()
            .map(|(id, entry)| {
                PendingTransfer::parse(id, entry)
                    .ok_or_else(|| RedisError::BadReply(format!("transfer {id} = {entry}")))
            })
            .collect()
    }
}
