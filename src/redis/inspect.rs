//! Read-only inspection of a SKU's Redis state for `stockd audit`: reservation
//! records, winners membership, buyer counters. Every call is bounded by the
//! caller's batch (one pipelined round trip per batch of O(1) commands), and
//! the winners set is walked with `SSCAN ... COUNT`, so an audit never blocks
//! Redis for long. Nothing here writes.

use std::sync::Arc;

use deadpool_redis::redis;

use super::buckets::Buckets;
use super::core::Core;
use super::RedisError;
use crate::domain::{RequestId, ReservationStatus, SkuId, UserId};

/// A reservation record's fields as stored (any may be missing or malformed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordView {
    /// `None` when the status is missing or not a known state.
    pub status: Option<ReservationStatus>,
    pub user_id: Option<u64>,
    pub count: Option<i64>,
    pub created_ms: Option<u64>,
}

/// Bits of a winners cursor below the bucket number (see `winners_page`).
const BUCKET_SHIFT: u32 = 48;

type RawRecord = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

/// Read-only views of a SKU's buyer state, in bounded batches.
pub struct Inspection {
    core: Arc<Core>,
    /// Which buckets a SKU's records and counters are spread over.
    buckets: Buckets,
}

impl Inspection {
    pub(super) fn new(core: Arc<Core>, buckets: Buckets) -> Self {
        Self { core, buckets }
    }

    /// The records of `ids` (same order); `None` where no record exists. A
    /// split SKU's buckets are each asked (the buyer is not known here).
    pub async fn records(
        &self,
        sku_id: SkuId,
        ids: &[RequestId],
    ) -> Result<Vec<Option<RecordView>>, RedisError> {
        let mut found: Vec<Option<RecordView>> = vec![None; ids.len()];
        if ids.is_empty() {
            return Ok(found);
        }
        let layout = self.buckets.layout(sku_id).await?;
        for bucket in layout.buckets() {
            let tag = layout.tag(bucket);
            let mut pipe = redis::pipe();
            for id in ids {
                pipe.cmd("HMGET")
                    .arg(self.core.keys.reservation_at(tag, id))
                    .arg("status")
                    .arg("user")
                    .arg("count")
                    .arg("created_ms");
            }
            let raw: Vec<RawRecord> = self
                .core
                .run(|mut c| async move { pipe.query_async(&mut c).await })
                .await?;
            for (slot, record) in found.iter_mut().zip(raw.into_iter().map(record_view)) {
                if slot.is_none() {
                    *slot = record;
                }
            }
        }
        Ok(found)
    }

    /// Whether each of `ids` is in the SKU's winners set (same order).
    pub async fn winners_contain(
        &self,
        sku_id: SkuId,
        ids: &[RequestId],
    ) -> Result<Vec<bool>, RedisError> {
        let mut found = vec![false; ids.len()];
        if ids.is_empty() {
            return Ok(found);
        }
        let layout = self.buckets.layout(sku_id).await?;
        let members: Vec<&str> = ids.iter().map(RequestId::as_str).collect();
        for bucket in layout.buckets() {
            let key = self.core.keys.winners_at(layout.tag(bucket));
            let members = &members;
            let here: Vec<bool> = self
                .core
                .run(|mut c| async move {
                    redis::cmd("SMISMEMBER")
                        .arg(&key)
                        .arg(members)
                        .query_async(&mut c)
                        .await
                })
                .await?;
            for (slot, yes) in found.iter_mut().zip(here) {
                *slot |= yes;
            }
        }
        Ok(found)
    }

    /// One `SSCAN` step over the winners set: the next cursor (0 = done) and
    /// about `count` members (Redis may return a few more or fewer). A split
    /// SKU's buckets are walked one after the other: the cursor's top 16 bits
    /// name the bucket, the rest is that bucket's `SSCAN` cursor.
    pub async fn winners_page(
        &self,
        sku_id: SkuId,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<String>), RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        let bucket = (cursor >> BUCKET_SHIFT) as u16;
        let Some(tag) = layout.checked_tag(bucket) else {
            return Ok((0, Vec::new()));
        };
        let key = self.core.keys.winners_at(tag);
        let inner = cursor & ((1 << BUCKET_SHIFT) - 1);
        let (next, members): (u64, Vec<String>) = self
            .core
            .run(|mut c| async move {
                redis::cmd("SSCAN")
                    .arg(&key)
                    .arg(inner)
                    .arg("COUNT")
                    .arg(count)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let next = match next {
            0 if bucket + 1 < layout.n() => u64::from(bucket + 1) << BUCKET_SHIFT,
            0 => 0,
            n if n >> BUCKET_SHIFT != 0 => {
                return Err(RedisError::BadReply(format!("SSCAN cursor {n} too large")))
            }
            n => (u64::from(bucket) << BUCKET_SHIFT) | n,
        };
        Ok((next, members))
    }

    /// The live-unit counters (`n` of each buyer hash) of `users` for this SKU
    /// (same order); `None` where no counter exists. One pipelined round trip.
    pub async fn user_counters(
        &self,
        sku_id: SkuId,
        users: &[UserId],
    ) -> Result<Vec<Option<i64>>, RedisError> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let layout = self.buckets.layout(sku_id).await?;
        let mut counters = vec![None; users.len()];
        for bucket in layout.buckets() {
            let mine: Vec<usize> = (0..users.len())
                .filter(|&i| layout.bucket_of(users[i]) == bucket)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let tag = layout.tag(bucket);
            let keys: Vec<String> = mine
                .iter()
                .map(|&i| self.core.keys.user_at(tag, users[i]))
                .collect();
            let raw: Vec<Option<String>> = self
                .core
                .run(|mut c| async move {
                    let mut pipe = redis::pipe();
                    for key in &keys {
                        pipe.cmd("HGET").arg(key).arg("n");
                    }
                    pipe.query_async(&mut c).await
                })
                .await?;
            for (&i, v) in mine.iter().zip(raw) {
                counters[i] = v.and_then(|s| s.parse().ok());
            }
        }
        Ok(counters)
    }
}

fn record_view(raw: RawRecord) -> Option<RecordView> {
    let (status, user, count, created) = raw;
    if status.is_none() && user.is_none() && count.is_none() && created.is_none() {
        return None;
    }
    Some(RecordView {
        status: status.as_deref().and_then(ReservationStatus::parse),
        user_id: user.and_then(|v| v.parse().ok()),
        count: count.and_then(|v| v.parse().ok()),
        created_ms: created.and_then(|v| v.parse().ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_record_is_none_and_a_partial_one_keeps_what_it_has() {
        assert_eq!(record_view((None, None, None, None)), None);
        let partial = record_view((Some("CONFIRMED".into()), None, Some("2".into()), None));
        assert_eq!(
            partial,
            Some(RecordView {
                status: Some(ReservationStatus::Confirmed),
                user_id: None,
                count: Some(2),
                created_ms: None,
            })
        );
        let odd = record_view((Some("LOST".into()), Some("x".into()), None, None)).unwrap();
        assert_eq!((odd.status, odd.user_id), (None, None));
    }
}
