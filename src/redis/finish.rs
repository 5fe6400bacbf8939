//! Mirroring MySQL's final decisions onto Redis records (`finish.lua`): one
//! reservation (a confirm, a cancel) or a batch of one SKU's (the closer's
//! expiries, `ops::lifecycle::expire_many`).
//!
//! Every final state of a hold's line passes here (a single reservation, an
//! order's line; confirmed, released, rejected), so this is where the hold
//! budget (`budget.rs`) is given back, once the records are final: by the
//! line's name, so a repeated finish gives nothing back twice.
//!
//! A batch is one script call per bucket and [`FINISH_CHUNK`] reservations,
//! so the quota give-back, the records, and the sold-out flag with its
//! broadcast cost one round trip for the lot, not one each. Every
//! reservation of a call lives in one bucket (one hash tag, so one cluster
//! slot): the batch is split by the buyer's bucket first.

use std::collections::BTreeMap;

use super::reservation::{FinishEffect, FinishOutcome, Reservations};
use super::RedisError;
use crate::domain::{RequestId, ReservationStatus, SkuId, UserId};

/// Reservations per script call: bounds one call's keys and its time on the
/// Redis thread (a few microseconds each) so a batch never stalls admissions.
pub const FINISH_CHUNK: usize = 200;

/// One reservation of a batch to mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishItem {
    pub request_id: RequestId,
    /// Routes the record to its bucket; the quota given back is this buyer's.
    pub user_id: UserId,
    pub count: u32,
}

impl Reservations {
    /// Mirrors a final state decided in MySQL (see `finish.lua`); idempotent.
    /// `effect`: what the state does beyond its status ([`FinishEffect`]).
    pub async fn finish(
        &self,
        sku_id: SkuId,
        request_id: &RequestId,
        user_id: UserId,
        count: u32,
        status: ReservationStatus,
        effect: FinishEffect,
    ) -> Result<FinishOutcome, RedisError> {
        let item = FinishItem {
            request_id: request_id.clone(),
            user_id,
            count,
        };
        let outcomes = self.finish_many(sku_id, &[item], status, effect).await?;
        Ok(outcomes[0])
    }

    /// [`Self::finish`] for many reservations of one SKU, all to `status`:
    /// one outcome each, in order. A cached split layout whose bucket hash is
    /// gone is read again first (a re-split that shrank the SKU: the record
    /// is in the buyer's new bucket), as a line's release does
    /// (`order_holds.rs`); the calls already applied stand (idempotent).
    pub async fn finish_many(
        &self,
        sku_id: SkuId,
        items: &[FinishItem],
        status: ReservationStatus,
        effect: FinishEffect,
    ) -> Result<Vec<FinishOutcome>, RedisError> {
        assert!(
            status != ReservationStatus::Reserved,
            "finish needs a final status"
        );
        let mut outcomes: Vec<Option<FinishOutcome>> = vec![None; items.len()];
        let mut layout = self.buckets.layout(sku_id).await?;
        for fresh in [false, true] {
            let mut by_bucket: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
            for (i, item) in items.iter().enumerate() {
                if outcomes[i].is_none() {
                    let bucket = layout.bucket_of(item.user_id);
                    by_bucket.entry(bucket).or_default().push(i);
                }
            }
            let mut stale = false;
            'buckets: for (bucket, indexes) in by_bucket {
                for chunk in indexes.chunks(FINISH_CHUNK) {
                    let call = Call {
                        layout: &layout,
                        bucket,
                        status,
                        effect,
                        cached: !fresh,
                    };
                    let picked: Vec<&FinishItem> = chunk.iter().map(|&i| &items[i]).collect();
                    match self.finish_call(&call, &picked).await? {
                        Some(words) => {
                            for (&i, outcome) in chunk.iter().zip(words) {
                                outcomes[i] = Some(outcome);
                            }
                        }
                        None => {
                            stale = true;
                            break 'buckets;
                        }
                    }
                }
            }
            if !stale {
                let holds: Vec<(UserId, &RequestId)> = (items.iter())
                    .map(|item| (item.user_id, &item.request_id))
                    .collect();
                self.budget.give_back_held(sku_id, &holds).await?;
                return Ok(outcomes
                    .into_iter()
                    .map(|o| o.expect("every item finished"))
                    .collect());
            }
            layout = self.buckets.read_layout(sku_id).await?;
        }
        Err(RedisError::BadReply(format!(
            "SKU {sku_id}: bucket layout changed twice during one finish"
        )))
    }

    /// One `finish.lua` call of one bucket; `None` when the script saw
    /// another bucket layout (`LAYOUT`: nothing written).
    async fn finish_call(
        &self,
        call: &Call<'_>,
        items: &[&FinishItem],
    ) -> Result<Option<Vec<FinishOutcome>>, RedisError> {
        let (layout, bucket) = (call.layout, call.bucket);
        let tag = layout.tag(bucket);
        let flag = |on: bool| if on { "1" } else { "0" };
        let mut invocation = super::scripts::FINISH.prepare_invoke();
        invocation
            .key(self.core.keys.sku_at(tag))
            .arg(call.status.as_str())
            .arg(self.record_lifetime_ms())
            .arg(self.core.keys.soldout_channel())
            .arg(layout.event_subject(bucket))
            .arg(flag(call.effect == FinishEffect::ReturnsStock))
            .arg(layout.n())
            .arg(flag(call.effect == FinishEffect::Lapsed))
            .arg(flag(call.cached && layout.is_split()));
        for item in items {
            invocation
                .key(self.core.keys.reservation_at(tag, &item.request_id))
                .key(self.core.keys.user_at(tag, item.user_id))
                .arg(item.user_id.get())
                .arg(item.count);
        }
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        if reply.first().map(String::as_str) == Some("LAYOUT") {
            return Ok(None);
        }
        if reply.len() != items.len() {
            return Err(RedisError::BadReply(format!("{reply:?}")));
        }
        let words = reply.iter().map(|word| match word.as_str() {
            "APPLIED" => Ok(FinishOutcome::Applied),
            "ALREADY" => Ok(FinishOutcome::Already),
            "TOMBSTONE" => Ok(FinishOutcome::Tombstone),
            _ => Err(RedisError::BadReply(format!("{reply:?}"))),
        });
        words.collect::<Result<Vec<_>, _>>().map(Some)
    }
}

/// What one script call of a batch is: its bucket and the final state.
struct Call<'a> {
    layout: &'a super::buckets::Layout,
    bucket: u16,
    status: ReservationStatus,
    effect: FinishEffect,
    /// The layout came from the cache (not read just now).
    cached: bool,
}
