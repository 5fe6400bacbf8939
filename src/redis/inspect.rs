//! Read-only inspection of a SKU's Redis state for `stockd audit`: reservation
//! records, winners membership, buyer counters. Every call is bounded by the
//! caller's batch (one pipelined round trip per batch of O(1) commands), and
//! the winners set is walked with `SSCAN ... COUNT`, so an audit never blocks
//! Redis for long. Nothing here writes.

use deadpool_redis::redis;

use super::{RedisError, RedisStore};
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

type RawRecord = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl RedisStore {
    /// The records of `ids` (same order); `None` where no record exists.
    pub async fn records(
        &self,
        sku_id: SkuId,
        ids: &[RequestId],
    ) -> Result<Vec<Option<RecordView>>, RedisError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("HMGET")
                .arg(self.keys().reservation(sku_id, id))
                .arg("status")
                .arg("user")
                .arg("count")
                .arg("created_ms");
        }
        let raw: Vec<RawRecord> = self
            .run(|mut c| async move { pipe.query_async(&mut c).await })
            .await?;
        Ok(raw.into_iter().map(record_view).collect())
    }

    /// Whether each of `ids` is in the SKU's winners set (same order).
    pub async fn winners_contain(
        &self,
        sku_id: SkuId,
        ids: &[RequestId],
    ) -> Result<Vec<bool>, RedisError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let key = self.keys().winners(sku_id);
        let members: Vec<&str> = ids.iter().map(RequestId::as_str).collect();
        self.run(|mut c| async move {
            redis::cmd("SMISMEMBER")
                .arg(&key)
                .arg(&members)
                .query_async(&mut c)
                .await
        })
        .await
    }

    /// One `SSCAN` step over the winners set: the next cursor (0 = done) and
    /// about `count` members (Redis may return a few more or fewer).
    pub async fn winners_page(
        &self,
        sku_id: SkuId,
        cursor: u64,
        count: usize,
    ) -> Result<(u64, Vec<String>), RedisError> {
        let key = self.keys().winners(sku_id);
        self.run(|mut c| async move {
            redis::cmd("SSCAN")
                .arg(&key)
                .arg(cursor)
                .arg("COUNT")
                .arg(count)
                .query_async(&mut c)
                .await
        })
        .await
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
        let keys: Vec<String> = users.iter().map(|u| self.keys().user(sku_id, *u)).collect();
        let raw: Vec<Option<String>> = self
            .run(|mut c| async move {
                let mut pipe = redis::pipe();
                for key in &keys {
                    pipe.cmd("HGET").arg(key).arg("n");
                }
                pipe.query_async(&mut c).await
            })
            .await?;
        Ok(raw
            .into_iter()
            .map(|v| v.and_then(|s| s.parse().ok()))
            .collect())
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
