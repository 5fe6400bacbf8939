//! The reservation aggregate in Redis: the reserve script (the hot path), the
//! finish script that mirrors MySQL's decision, and the reservation record.

use std::collections::HashMap;

use deadpool_redis::redis;

use super::reply::{parse_reserve_reply, ReserveRequest};
use super::{RedisError, RedisStore};
use crate::domain::{RequestId, Reservation, ReservationStatus, ReserveOutcome, SkuId, UserId};

/// What `finish.lua` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishOutcome {
    Applied,
    Already,
    Tombstone,
}

impl RedisStore {
    /// Stage 1: the atomic admission decision (one EVALSHA round trip).
    pub async fn reserve(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
    ) -> Result<ReserveOutcome, RedisError> {
        let mut invocation = self.reserve.prepare_invoke();
        invocation
            .key(self.keys.sku(sku_id))
            .key(self.keys.reservation(sku_id, request_id))
            .key(self.keys.user(sku_id, user_id))
            .key(self.keys.outbox(sku_id))
            .key(self.keys.winners(sku_id))
            .arg(request_id.as_str())
            .arg(sku_id.get())
            .arg(user_id.get())
            .arg(count)
            .arg(self.reservation_ttl_ms)
            .arg(self.retention_ms)
            .arg(self.outbox_max_len)
            .arg(self.keys.soldout_channel())
            .arg(self.buyer_rate.0)
            .arg(self.buyer_rate.1);
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        let req = ReserveRequest {
            sku_id,
            request_id,
            user_id,
            count,
        };
        parse_reserve_reply(&req, &reply)
    }

    /// Mirrors a final state decided in MySQL (see `finish.lua`); idempotent.
    /// `returns_stock`: a rejection whose unit stays in MySQL's stock.
    pub async fn finish(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
        status: ReservationStatus,
        returns_stock: bool,
    ) -> Result<FinishOutcome, RedisError> {
        assert!(
            status != ReservationStatus::Reserved,
            "finish needs a final status"
        );
        let mut invocation = self.finish.prepare_invoke();
        invocation
            .key(self.keys.sku(sku_id))
            .key(self.keys.reservation(sku_id, request_id))
            .key(self.keys.user(sku_id, user_id))
            .arg(status.as_str())
            .arg(user_id.get())
            .arg(count)
            .arg(self.reservation_ttl_ms + self.retention_ms)
            .arg(self.keys.soldout_channel())
            .arg(sku_id.get())
            .arg(if returns_stock { "1" } else { "0" });
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match reply.first().map(String::as_str) {
            Some("APPLIED") => Ok(FinishOutcome::Applied),
            Some("ALREADY") => Ok(FinishOutcome::Already),
            Some("TOMBSTONE") => Ok(FinishOutcome::Tombstone),
            _ => Err(RedisError::BadReply(format!("{reply:?}"))),
        }
    }

    /// The reservation record held in Redis, if it still exists.
    pub async fn reservation(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
    ) -> Result<Option<Reservation>, RedisError> {
        let key = self.keys.reservation(sku_id, request_id);
        let map: HashMap<String, String> = self
            .run(|mut c| async move { redis::cmd("HGETALL").arg(&key).query_async(&mut c).await })
            .await?;
        if map.is_empty() {
            return Ok(None);
        }
        let bad = || RedisError::BadReply(format!("reservation record {map:?}"));
        let num = |name: &str| {
            map.get(name)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(bad)
        };
        Ok(Some(Reservation {
            request_id: request_id.clone(),
            sku_id,
            user_id: UserId::new(num("user")?).map_err(|_| bad())?,
            count: u32::try_from(num("count")?).map_err(|_| bad())?,
            status: map
                .get("status")
                .and_then(|s| ReservationStatus::parse(s))
                .ok_or_else(bad)?,
            created_at_ms: num("created_ms")?,
            expires_at_ms: num("expires_ms")?,
        }))
    }
}
