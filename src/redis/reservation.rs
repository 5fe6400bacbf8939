//! The reservation aggregate in Redis: the reserve script (the hot path), the
//! finish script that mirrors MySQL's decision, and the reservation record.

use std::collections::HashMap;

use deadpool_redis::redis;

use super::buckets::Layout;
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

/// Reservation attempts of one request: a dry bucket's refill and a stale
/// layout each cost one more.
const RESERVE_ATTEMPTS: usize = 6;

impl RedisStore {
    /// Stage 1: the atomic admission decision (one EVALSHA round trip). A
    /// split SKU's dry bucket is refilled first (`redis/buckets/refill.rs`).
    pub async fn reserve(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
    ) -> Result<ReserveOutcome, RedisError> {
        let mut layout = self.layout(sku_id).await?;
        let mut relaid = false;
        for attempt in 0..RESERVE_ATTEMPTS {
            let bucket = layout.bucket_of(user_id);
            let generation = layout
                .is_split()
                .then(|| self.refills.generation(sku_id, bucket));
            if attempt > 0 && layout.is_split() {
                super::buckets::transfer::count_round_trip("reserve");
            }
            let reply = self
                .reserve_in(&layout, bucket, request_id, user_id, count)
                .await?;
            let relayout = match reply.first().map(String::as_str) {
                Some("LAYOUT") => true,
                // A bucket hash gone (or not created yet): the layout may be new.
                Some("NOT_LOADED") => bucket > 0,
                Some("DRY") => {
                    let refill = self
                        .refill(&layout, bucket, count, generation.unwrap_or(0))
                        .await?;
                    refill == super::buckets::Refill::Layout
                }
                _ => {
                    let req = ReserveRequest {
                        sku_id,
                        request_id,
                        user_id,
                        count,
                        bucket,
                    };
                    return parse_reserve_reply(&req, &reply);
                }
            };
            if relayout {
                if relaid {
                    return Err(RedisError::BadReply(format!(
                        "SKU {sku_id}: bucket layout changed twice during one reservation"
                    )));
                }
                relaid = true;
                layout = self.read_layout(sku_id).await?;
            }
        }
        Ok(ReserveOutcome::Rebalancing)
    }

    async fn reserve_in(
        &self,
        layout: &Layout,
        bucket: u16,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
    ) -> Result<Vec<String>, RedisError> {
        let tag = layout.tag(bucket);
        let mut invocation = self.reserve.prepare_invoke();
        invocation
            .key(self.keys.sku_at(tag))
            .key(self.keys.reservation_at(tag, request_id))
            .key(self.keys.user_at(tag, user_id))
            .key(self.keys.outbox_at(tag))
            .key(self.keys.winners_at(tag))
            .arg(request_id.as_str())
            .arg(layout.sku().get())
            .arg(user_id.get())
            .arg(count)
            .arg(self.reservation_ttl_ms)
            .arg(self.retention_ms)
            .arg(self.outbox_max_len)
            .arg(self.keys.soldout_channel())
            .arg(self.buyer_rate.0)
            .arg(self.buyer_rate.1)
            .arg(layout.n())
            .arg(layout.event_subject(bucket));
        self.run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await
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
        let mut layout = self.layout(sku_id).await?;
        for _ in 0..2 {
            let bucket = layout.bucket_of(user_id);
            let tag = layout.tag(bucket);
            let mut invocation = self.finish.prepare_invoke();
            invocation
                .key(self.keys.sku_at(tag))
                .key(self.keys.reservation_at(tag, request_id))
                .key(self.keys.user_at(tag, user_id))
                .arg(status.as_str())
                .arg(user_id.get())
                .arg(count)
                .arg(self.reservation_ttl_ms + self.retention_ms)
                .arg(self.keys.soldout_channel())
                .arg(layout.event_subject(bucket))
                .arg(if returns_stock { "1" } else { "0" })
                .arg(layout.n());
            let reply: Vec<String> = self
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
            match reply.first().map(String::as_str) {
                Some("APPLIED") => return Ok(FinishOutcome::Applied),
                Some("ALREADY") => return Ok(FinishOutcome::Already),
                Some("TOMBSTONE") => return Ok(FinishOutcome::Tombstone),
                Some("LAYOUT") => layout = self.read_layout(sku_id).await?,
                _ => return Err(RedisError::BadReply(format!("{reply:?}"))),
            }
        }
        Err(RedisError::BadReply(format!(
            "SKU {sku_id}: bucket layout changed twice during one finish"
        )))
    }

    /// The reservation record held in Redis, if it still exists.
    pub async fn reservation(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
    ) -> Result<Option<Reservation>, RedisError> {
        // The buyer is not known here: look in each bucket (one for most SKUs).
        let layout = self.layout(sku_id).await?;
        let mut map: HashMap<String, String> = HashMap::new();
        for bucket in layout.buckets() {
            let key = self.keys.reservation_at(layout.tag(bucket), request_id);
            map =
                self.run(|mut c| async move {
                    redis::cmd("HGETALL").arg(&key).query_async(&mut c).await
                })
                .await?;
            if !map.is_empty() {
                break;
            }
        }
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
