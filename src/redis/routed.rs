//! Routing one buyer's script call to its bucket, with the refills of a
//! split SKU's dry bucket and the re-read of a layout that moved: the loop
//! a single reservation and an order line's hold (`order_holds.rs`) share.
//! The script is the caller's; it answers `DRY` when its bucket needs a
//! lease, `LAYOUT` when it was routed with a stale bucket count.

use std::future::Future;

use super::admission::BucketTarget;
use super::buckets::transfer::count_round_trip;
use super::buckets::{Buckets, Refill, RefillEnd};
use super::RedisError;
use crate::domain::{SkuId, UserId};

/// Script calls one request may make (a split SKU's dry bucket is retried
/// after each refill; a stale layout costs one more).
const CALLS: usize = 16;

/// Refills one request may run itself; waiting for another request's
/// refill does not count.
const REFILLS: usize = 4;

/// What a routed call ended in.
pub(super) enum Routed {
    /// The script's answer on the buyer's bucket (anything but DRY or LAYOUT).
    Reply { bucket: u16, reply: Vec<String> },
    /// The refill this call waited for drained the bucket empty.
    SoldOut,
    /// The call ran out of refills or calls with the bucket still dry.
    Rebalancing,
}

/// Calls `call` on the buyer's bucket of `sku_id` (routed and refilled by
/// `buckets`) until it answers something other than DRY (refill first) or
/// LAYOUT (re-read first).
pub(super) async fn routed<F, Fut>(
    buckets: &Buckets,
    sku_id: SkuId,
    user_id: UserId,
    count: u32,
    call: F,
) -> Result<Routed, RedisError>
where
    F: Fn(BucketTarget) -> Fut,
    Fut: Future<Output = Result<Vec<String>, RedisError>>,
{
    let mut layout = buckets.layout(sku_id).await?;
    let mut relaid = false;
    let mut refills = 0;
    for attempt in 0..CALLS {
        let bucket = layout.bucket_of(user_id);
        let generation = layout
            .is_split()
            .then(|| buckets.refill_generation(sku_id, bucket));
        if attempt > 0 && layout.is_split() {
            count_round_trip("reserve");
        }
        let reply = call(BucketTarget::of(&layout, bucket)).await?;
        let relayout = match reply.first().map(String::as_str) {
            Some("LAYOUT") => true,
            // A bucket hash gone (or not created yet): the layout may be new.
            Some("NOT_LOADED") if bucket > 0 => true,
            Some("DRY") => {
                match buckets
                    .refill(&layout, bucket, count, generation.unwrap_or(0))
                    .await?
                {
                    Refill::Layout => true,
                    // The refill this request waited for drained the
                    // bucket empty: Redis refuses its buyers from then on.
                    Refill::ByOther(Some(RefillEnd::SoldOut)) => return Ok(Routed::SoldOut),
                    Refill::ByOther(_) => false,
                    Refill::Leased(_) | Refill::Drained { .. } | Refill::Busy => {
                        refills += 1;
                        if refills > REFILLS {
                            break;
                        }
                        false
                    }
                }
            }
            _ => return Ok(Routed::Reply { bucket, reply }),
        };
        if relayout {
            if relaid {
                return Err(RedisError::BadReply(format!(
                    "SKU {sku_id}: bucket layout changed twice during one reservation"
                )));
            }
            relaid = true;
            layout = buckets.read_layout(sku_id).await?;
        }
    }
    Ok(Routed::Rebalancing)
}
