//! Rebuilding the buyer side of a SKU in Redis from MySQL (`rebuild.lua`):
//! reservation records, winners entries and buyer counters, plus mirrors of
//! decisions Redis lost. Used by warm-up and by the reconciler's repair.

use super::Drift;
use crate::domain::{RequestId, ReservationStatus, SkuId, UserId};
use crate::redis::buckets::Layout;
use crate::redis::{scripts, RedisError};

/// One ledger row as the rebuild needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildRow {
    pub request_id: RequestId,
    pub user_id: UserId,
    pub count: u32,
    pub status: ReservationStatus,
    pub created_ms: u64,
    pub expires_ms: u64,
    /// How much longer Redis would still hold this record (its TTL).
    pub keep_ms: u64,
    /// A rejection whose unit stays in MySQL's stock (LIMIT_EXCEEDED).
    pub returns_stock: bool,
    /// A release by expiry: the hold lapsed unpaid and counts against the
    /// buyer (`limits.max_lapsed_holds`) when this rebuild writes it.
    pub lapsed: bool,
}

/// What one rebuild call did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RebuildCounts {
    /// Records written because Redis had none.
    pub restored: u64,
    /// Lost mirrors of a final status applied now.
    pub finished: u64,
    /// Rows Redis already agreed with (or in flight).
    pub unchanged: u64,
}

impl RebuildCounts {
    pub fn add(&mut self, other: RebuildCounts) {
        self.restored += other.restored;
        self.finished += other.finished;
        self.unchanged += other.unchanged;
    }
}

impl Drift {
    /// Rebuilds one batch of a SKU's ledger rows: one atomic script call per
    /// bucket the rows' buyers belong to (one for a SKU that is not split).
    pub async fn rebuild_batch(
        &self,
        sku_id: SkuId,
        rows: &[RebuildRow],
    ) -> Result<RebuildCounts, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        let mut counts = RebuildCounts::default();
        for bucket in layout.buckets() {
            let mine: Vec<&RebuildRow> = rows
                .iter()
                .filter(|r| layout.bucket_of(r.user_id) == bucket)
                .collect();
            counts.add(self.rebuild_bucket(&layout, bucket, &mine).await?);
        }
        Ok(counts)
    }

    async fn rebuild_bucket(
        &self,
        layout: &Layout,
        bucket: u16,
        rows: &[&RebuildRow],
    ) -> Result<RebuildCounts, RedisError> {
        if rows.is_empty() {
            return Ok(RebuildCounts::default());
        }
        let keys = &self.core.keys;
        let tag = layout.tag(bucket);
        let mut invocation = scripts::REBUILD.prepare_invoke();
        invocation
            .key(keys.sku_at(tag))
            .key(keys.winners_at(tag))
            .arg(keys.soldout_channel())
            .arg(layout.event_subject(bucket));
        for row in rows {
            invocation
                .key(keys.reservation_at(tag, &row.request_id))
                .key(keys.user_at(tag, row.user_id))
                .arg(row.request_id.as_str())
                .arg(row.user_id.get())
                .arg(row.count)
                .arg(row.status.as_str())
                .arg(row.created_ms)
                .arg(row.expires_ms)
                .arg(row.keep_ms.max(1))
                .arg(if row.returns_stock { "1" } else { "0" })
                .arg(if row.lapsed { "1" } else { "0" });
        }
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        let num = |i: usize| {
            reply
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| RedisError::BadReply(format!("rebuild {reply:?}")))
        };
        Ok(RebuildCounts {
            restored: num(0)?,
            finished: num(1)?,
            unchanged: num(2)?,
        })
    }
}
