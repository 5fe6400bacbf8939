//! The reservation aggregate in Redis: the reserve script (the hot path), the
//! finish script that mirrors MySQL's decision, and the reservation record.

use std::collections::HashMap;
use std::sync::Arc;

use deadpool_redis::redis;

use super::admission::{Admission, Ask, Batching, BucketTarget, PassArg, ReserveArgs};
use super::buckets::{Buckets, Layout};
use super::budget::HoldBudget;
use super::core::Core;
use super::reply::{parse_reserve_reply, ReserveRequest};
use super::routed::{routed, Routed};
use super::RedisError;
use crate::domain::{
    RequestId, Requester, Reservation, ReservationStatus, ReserveOutcome, SkuId, UserId,
};

/// What `finish.lua` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishOutcome {
    Applied,
    Already,
    Tombstone,
}

/// What a final state does in `finish.lua` beyond its status and the
/// buyer's quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishEffect {
    /// Nothing more: a release returns its unit, a rejection only the quota.
    Plain,
    /// A rejection whose unit stays in MySQL's stock (`LIMIT_EXCEEDED`,
    /// `ORDER_REJECTED`): the unit comes back too.
    ReturnsStock,
    /// A release by expiry: the hold lapsed unpaid and counts against its
    /// buyer (`x`, `limits.max_lapsed_holds`).
    Lapsed,
}

/// Reserving, finishing and reading reservations (and settling a request id
/// admitted twice, `readmit.rs`).
pub struct Reservations {
    pub(super) core: Arc<Core>,
    /// Routes each buyer to a bucket; refills a dry one.
    pub(super) buckets: Buckets,
    /// The reserve script's lanes (`admission.rs`); holds the script's
    /// arguments (time to pay, retention, outbox bound, buyer rate).
    admission: Admission,
    /// The buyers' hold budget, given back by every finish (`finish.rs`).
    pub(super) budget: HoldBudget,
}

/// A reservation record as Redis holds it, with the order it belongs to.
#[derive(Debug, Clone)]
pub struct HeldRecord {
    pub reservation: Reservation,
    /// The order id when the record is a line of an order.
    pub order: Option<String>,
    /// The attempt of the order that held the line (a line held line by
    /// line, `order_hold.lua`); none for a line of `order.lua`'s one call.
    pub attempt: Option<u64>,
}

impl Reservations {
    pub(super) fn new(
        core: Arc<Core>,
        buckets: Buckets,
        budget: HoldBudget,
        args: ReserveArgs,
        batching: Batching,
    ) -> Self {
        Self {
            admission: Admission::new(core.clone(), args, batching),
            core,
            buckets,
            budget,
        }
    }

    /// The hold budget every finish gives back to (`RedisStore::with_hold_budget`).
    pub(super) fn set_budget(&mut self, budget: HoldBudget) {
        self.budget = budget;
    }

    /// Turns on the per-buyer rate limit the reserve script enforces.
    pub(super) fn set_buyer_rate(&mut self, per_second: f64, burst: u32) {
        let args = ReserveArgs {
            buyer_rate: (per_second, burst),
            ..*self.admission.args()
        };
        self.admission = self.admission.with_args(args);
    }

    /// Turns on the cap on lapsed holds the reserve script enforces.
    pub(super) fn set_lapse_limit(&mut self, max_lapsed: u32) {
        let args = ReserveArgs {
            max_lapsed,
            ..*self.admission.args()
        };
        self.admission = self.admission.with_args(args);
    }

    /// The reserve script's arguments: the buyer's rules (rate limit, cap
    /// on lapsed holds) an order line is held to as a reservation is
    /// (`orders.rs`, `order_holds.rs`).
    pub(super) fn args(&self) -> &ReserveArgs {
        self.admission.args()
    }

    /// How long a reservation record lives in Redis from its creation: the
    /// time to pay plus the retention for replays.
    pub fn record_lifetime_ms(&self) -> u64 {
        let args = self.admission.args();
        args.ttl_ms + args.retention_ms
    }

    /// Stage 1: the atomic admission decision (one EVALSHA round trip,
    /// shared with the concurrent requests of its bucket: `admission.rs`). A
    /// split SKU's dry bucket is refilled first (`redis/buckets/refill.rs`).
    /// Asked by `requester`: the record names its client, and another
    /// client's record is [`ReserveOutcome::Taken`] (contract §6.2).
    pub async fn reserve(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
        requester: &Requester,
    ) -> Result<ReserveOutcome, RedisError> {
        self.reserve_carrying(sku_id, request_id, user_id, count, requester, PassArg::None)
            .await
    }

    /// [`Self::reserve`] of a request with its `pass`: a SKU with
    /// `requires_pass` refuses one without ([`ReserveOutcome::Gated`]), as it
    /// refuses one outside its sale window by Redis's clock; a pass the
    /// script claims and another hold has is [`ReserveOutcome::PassUsed`].
    pub async fn reserve_carrying(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
        requester: &Requester,
        pass: PassArg,
    ) -> Result<ReserveOutcome, RedisError> {
        let ask = Ask {
            request_id: request_id.clone(),
            user_id,
            count,
            requester: requester.script_arg(),
            pass,
        };
        let call = |target: BucketTarget| self.admission.reserve(target, ask.clone());
        match routed(&self.buckets, sku_id, user_id, count, call).await? {
            Routed::Reply { bucket, reply } => {
                let req = ReserveRequest {
                    sku_id,
                    request_id,
                    user_id,
                    count,
                    bucket,
                    client: requester.stamp(),
                };
                parse_reserve_reply(&req, &reply)
            }
            Routed::SoldOut => Ok(ReserveOutcome::SoldOut),
            Routed::Rebalancing => Ok(ReserveOutcome::Rebalancing),
        }
    }

    /// Decides `asks` on `bucket` of `layout` in exactly one reserve script
    /// call, outside the lanes: one outcome per ask, in order (a bucket that
    /// asks for a lease, or a layout that moved, is an error here). For tests
    /// and tools that need a batch of a known make-up; requests go through
    /// [`Self::reserve`].
    pub async fn decide_batch(
        &self,
        layout: &Layout,
        bucket: u16,
        asks: &[Ask],
    ) -> Result<Vec<Result<ReserveOutcome, RedisError>>, RedisError> {
        let refs: Vec<&Ask> = asks.iter().collect();
        let target = BucketTarget::of(layout, bucket);
        let replies = self.admission.call_once(&target, &refs).await?;
        Ok(asks
            .iter()
            .zip(replies)
            .map(|(ask, reply)| {
                let req = ReserveRequest {
                    sku_id: layout.sku(),
                    request_id: &ask.request_id,
                    user_id: ask.user_id,
                    count: ask.count,
                    bucket,
                    client: ask.requester.get(1..).filter(|c| !c.is_empty()),
                };
                parse_reserve_reply(&req, &reply)
            })
            .collect())
    }

    /// Mirrors an extension decided in MySQL: the record's new `expires_ms`
    /// (see `extend.lua`; idempotent). Returns whether the record changed.
    pub async fn extend(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        expires_ms: u64,
        extensions: u32,
    ) -> Result<bool, RedisError> {
        let mut layout = self.buckets.layout(sku_id).await?;
        for _ in 0..2 {
            let tag = layout.tag(layout.bucket_of(user_id));
            let mut invocation = super::scripts::EXTEND.prepare_invoke();
            invocation
                .key(self.core.keys.sku_at(tag))
                .key(self.core.keys.reservation_at(tag, request_id))
                .key(self.core.keys.user_at(tag, user_id))
                .arg(expires_ms)
                .arg(self.admission.args().retention_ms)
                .arg(layout.n())
                .arg(extensions);
            let reply: Vec<String> = self
                .core
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
            match reply.first().map(String::as_str) {
                Some("APPLIED") => return Ok(true),
                Some("SAME" | "ALREADY" | "MISSING") => return Ok(false),
                Some("LAYOUT") => layout = self.buckets.read_layout(sku_id).await?,
                _ => return Err(RedisError::BadReply(format!("{reply:?}"))),
            }
        }
        Err(RedisError::BadReply(format!(
            "SKU {sku_id}: bucket layout changed twice during one extension"
        )))
    }

    /// The extensions the record mirrors (`ext`, written by `extend.lua`; 0
    /// when it was never extended or is gone). Read only when the record's
    /// time is later than MySQL's: the proof of an extension MySQL lost.
    pub async fn mirrored_extensions(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
    ) -> Result<u32, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        let key = self
            .core
            .keys
            .reservation_at(layout.tag(layout.bucket_of(user_id)), request_id);
        let ext: Option<u32> = self
            .core
            .run(|mut c| async move {
                redis::cmd("HGET")
                    .arg(&key)
                    .arg("ext")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(ext.unwrap_or(0))
    }

    /// The reservation record held in Redis, if it still exists.
    pub async fn reservation(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
    ) -> Result<Option<Reservation>, RedisError> {
        Ok(self
            .record(sku_id, request_id)
            .await?
            .map(|record| record.reservation))
    }

    /// The record of (`sku_id`, `request_id`) with the order it is a line
    /// of, if any (its `order` field): a line is never a single reservation.
    pub async fn record(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
    ) -> Result<Option<HeldRecord>, RedisError> {
        // The buyer is not known here: look in each bucket (one for most SKUs).
        let layout = self.buckets.layout(sku_id).await?;
        let mut map: HashMap<String, String> = HashMap::new();
        for bucket in layout.buckets() {
            let key = self
                .core
                .keys
                .reservation_at(layout.tag(bucket), request_id);
            map =
                self.core
                    .run(|mut c| async move {
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
        let reservation = Reservation {
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
            client: map.get("client").cloned(),
        };
        Ok(Some(HeldRecord {
            reservation,
            order: map.get("order").filter(|o| !o.is_empty()).cloned(),
            attempt: map.get("attempt").and_then(|a| a.parse().ok()),
        }))
    }
}

impl Reservations {
    /// A split SKU admits a request id once per bucket: the reserve script's
    /// mismatch check sees only its own bucket. When MySQL's unique key finds
    /// the id already taken by `owner` in another bucket, the second buyer's
    /// reservation is rejected in Redis (unit and quota back, record
    /// `REJECTED`). Returns whether it applied; `false` when both buyers share
    /// a bucket (the script refused the second one already, so the record is
    /// the owner's and must not be touched).
    pub async fn reject_foreign_duplicate(
        &self,
        msg: &crate::domain::Deduction,
        owner: UserId,
    ) -> Result<bool, RedisError> {
        let layout = self.buckets.layout(msg.sku_id).await?;
        if layout.bucket_of(owner) == layout.bucket_of(msg.user_id) {
            return Ok(false);
        }
        let outcome = self
            .finish(
                msg.sku_id,
                &msg.request_id,
                msg.user_id,
                msg.count,
                ReservationStatus::Rejected,
                FinishEffect::ReturnsStock,
            )
            .await?;
        Ok(outcome == FinishOutcome::Applied)
    }
}
