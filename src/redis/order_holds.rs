//! One line of an order held line by line (a Redis Cluster, or a line on a
//! split SKU: docs/architecture.md, "Orders"): its hold on the buyer's
//! bucket (`order_hold.lua`, routed and refilled as a single reservation
//! is) and its undo (`order_release.lua`). The intent that makes the lines
//! one order is `order_intents.rs`; the protocol is `ops/order_saga.rs`.

use deadpool_redis::redis::ScriptInvocation;

use std::sync::Arc;

use super::admission::BucketTarget;
use super::buckets::Buckets;
use super::core::Core;
use super::orders::LineRefusal;
use super::reservation::Reservations;
use super::routed::{routed, Routed};
use super::RedisError;
use crate::domain::{GateRefusal, RequestId, Requester, SkuId, UserId};

/// What every line of one attempt shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub order_id: RequestId,
    pub user_id: UserId,
    /// The intent's attempt number (`order_intent.lua`).
    pub number: u64,
    pub created_ms: u64,
    pub expires_ms: u64,
    /// The intent's deadline (Redis time, ms): a hold past it refuses
    /// itself, and the tombstones of the attempt live until it plus
    /// [`TOMBSTONE_MARGIN_MS`].
    pub deadline_ms: u64,
    /// Who placed the order: each line's record names its client
    /// (`Requester::stamp`), as a line of `order.lua` does, so the line's id
    /// is another client's `ID_TAKEN` to a single reservation, and a line
    /// whose SKU has another client's reservation of the id is `Taken`.
    /// [`Requester::Anyone`] records none (ownership not enforced, or an
    /// undo, which writes no record).
    pub requester: Requester,
    /// The order carries a verified pass: a line of a SKU with
    /// `requires_pass` may be held (`order_hold.lua`). Not part of the
    /// intent: set by the api that holds the lines (false otherwise).
    pub carries_pass: bool,
}

/// How long an undone attempt's tombstone (and its `ABORTED` record)
/// outlives the attempt's deadline. A hold of the attempt is refused past
/// the deadline by its own node's clock (`order_hold.lua`), the clock the
/// tombstone's life is counted by too (`order_release.lua`), so no hold of
/// the attempt can still hold once the deadline passed: the tombstone is
/// needed only for a hold sent before it whose answer was lost or that has
/// not run yet. The margin covers the time between the script's clock read
/// and its write, and a node's clock stepped back by NTP; it is not the
/// record lifetime (a day), which a refused order's keys used to keep.
pub const TOMBSTONE_MARGIN_MS: u64 = 1_000;

/// What one line's hold decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineHold {
    /// Held (or held already by this attempt); the bucket's available after it.
    Held { available_after: u64 },
    /// The line cannot be held.
    Refused(LineRefusal),
    /// The attempt was undone meanwhile (the sweeper took it): stop.
    Aborted,
    /// The SKU has a record of this id that is not this attempt's.
    Mismatch,
    /// The SKU has another client's record of this id (contract §6.2).
    Taken,
    /// A split SKU's bucket stayed dry through every refill.
    Rebalancing,
    /// Too few units, while other attempts hold enough of them to cover the
    /// shortfall and may still give them back (an attempt bound to fail on
    /// a later line): not a refusal yet (`order_hold.lua`).
    Contended,
}

impl Reservations {
    /// Holds one line of `attempt` on the buyer's bucket of `sku_id`.
    pub async fn hold_line(
        &self,
        attempt: &Attempt,
        sku_id: SkuId,
        count: u32,
    ) -> Result<LineHold, RedisError> {
        let lifetime = self.record_lifetime_ms();
        let call = |target: BucketTarget| {
            let mut invocation = self.line_call(&super::scripts::ORDER_HOLD, &target.tag, attempt);
            invocation
                .arg(attempt.order_id.as_str())
                .arg(attempt.user_id.get())
                .arg(count)
                .arg(attempt.number)
                .arg(attempt.created_ms)
                .arg(attempt.expires_ms)
                .arg(lifetime)
                .arg(target.n)
                .arg(attempt.deadline_ms)
                .arg(self.args().max_lapsed)
                .arg(attempt.requester.script_arg())
                .arg(self.args().buyer_rate.0)
                .arg(self.args().buyer_rate.1)
                .arg(if attempt.carries_pass { "1" } else { "0" });
            self.core
                .run(|mut c| async move { invocation.invoke_async::<Vec<String>>(&mut c).await })
        };
        let reply = match routed(&self.buckets, sku_id, attempt.user_id, count, call).await? {
            Routed::Reply { reply, .. } => reply,
            Routed::SoldOut => return Ok(LineHold::Refused(LineRefusal::SoldOut)),
            Routed::Rebalancing => return Ok(LineHold::Rebalancing),
        };
        let hold = parse_hold(&reply)?;
        if hold == LineHold::Refused(LineRefusal::NotLoaded) {
            // Unloaded since its layout was cached: the next order's check
            // before its intent (`order_saga.rs`) reads it again.
            self.buckets.forget_layout(sku_id);
        }
        Ok(hold)
    }

    /// Undoes one line of `attempt` if it holds it, and writes the
    /// tombstone that refuses a later hold of the attempt, living until the
    /// attempt's deadline plus [`TOMBSTONE_MARGIN_MS`]. Only for a line
    /// whose hold was sent. True when units went back. A cached split
    /// layout whose bucket hash is gone is read again first (a re-split
    /// that shrank the SKU: the line is in the buyer's new bucket).
    pub async fn release_line(&self, attempt: &Attempt, sku_id: SkuId) -> Result<bool, RedisError> {
        let mut layout = self.buckets.layout(sku_id).await?;
        for fresh in [false, true] {
            let bucket = layout.bucket_of(attempt.user_id);
            let keys = &self.core.keys;
            let mut invocation =
                self.line_call(&super::scripts::ORDER_RELEASE, layout.tag(bucket), attempt);
            invocation
                .arg(attempt.order_id.as_str())
                .arg(attempt.number)
                .arg(attempt.deadline_ms)
                .arg(keys.soldout_channel())
                .arg(layout.event_subject(bucket))
                .arg(layout.n())
                .arg(TOMBSTONE_MARGIN_MS)
                .arg(if !fresh && layout.is_split() {
                    "1"
                } else {
                    "0"
                });
            let reply: Vec<String> = self
                .core
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
            match reply.first().map(String::as_str) {
                Some("RELEASED") => return Ok(true),
                Some("NONE") => return Ok(false),
                Some("LAYOUT") => layout = self.buckets.read_layout(sku_id).await?,
                _ => return Err(RedisError::BadReply(format!("order release: {reply:?}"))),
            }
        }
        Err(RedisError::BadReply(format!(
            "SKU {sku_id}: bucket layout changed twice during one line's undo"
        )))
    }
}

impl Reservations {
    /// `script` invoked with the five keys a line's hold and its undo share,
    /// on the bucket `tag`: stock hash, record, buyer, winners, tombstone.
    fn line_call(
        &self,
        script: &'static super::scripts::LuaScript,
        tag: &str,
        attempt: &Attempt,
    ) -> ScriptInvocation<'static> {
        let keys = &self.core.keys;
        let mut invocation = script.prepare_invoke();
        invocation
            .key(keys.sku_at(tag))
            .key(keys.reservation_at(tag, &attempt.order_id))
            .key(keys.user_at(tag, attempt.user_id))
            .key(keys.winners_at(tag))
            .key(keys.order_tombstone_at(tag, &attempt.order_id))
            .key(keys.order_pending_at(tag));
        invocation
    }

    /// What settles committed lines off the response path ([`LineSettler`]).
    pub fn settler(&self) -> LineSettler {
        LineSettler {
            core: self.core.clone(),
            buckets: self.buckets.clone(),
        }
    }
}

/// Settles the lines of a committed order (`order_settle.lua`), from a task
/// of its own: cheap to clone, it shares the store's connections and layout
/// cache.
#[derive(Clone)]
pub struct LineSettler {
    core: Arc<Core>,
    buckets: Buckets,
}

impl LineSettler {
    /// A committed line settled on the buyer's bucket of `sku_id`: its note
    /// among the bucket's pending units dropped, and the sold-out marker its
    /// hold left alone raised if the bucket is still empty. True when it
    /// raised the marker. An unsettled note is ignored past its deadline.
    pub async fn settle(&self, attempt: &Attempt, sku_id: SkuId) -> Result<bool, RedisError> {
        let layout = self.buckets.layout(sku_id).await?;
        let bucket = layout.bucket_of(attempt.user_id);
        let tag = layout.tag(bucket);
        let keys = &self.core.keys;
        let mut invocation = super::scripts::ORDER_SETTLE.prepare_invoke();
        invocation
            .key(keys.sku_at(tag))
            .key(keys.order_pending_at(tag))
            .arg(attempt.order_id.as_str())
            .arg(keys.soldout_channel())
            .arg(layout.event_subject(bucket));
        let raised: i64 = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        Ok(raised == 1)
    }
}

fn parse_hold(reply: &[String]) -> Result<LineHold, RedisError> {
    let bad = || RedisError::BadReply(format!("order hold: {reply:?}"));
    let num = |i: usize| -> Result<u64, RedisError> {
        reply.get(i).and_then(|v| v.parse().ok()).ok_or_else(bad)
    };
    Ok(match reply.first().map(String::as_str) {
        Some("OK" | "HELD") => LineHold::Held {
            available_after: num(1)?,
        },
        Some("ABORTED") => LineHold::Aborted,
        Some("MISMATCH") => LineHold::Mismatch,
        Some("TAKEN") => LineHold::Taken,
        Some("NOT_LOADED") => LineHold::Refused(LineRefusal::NotLoaded),
        Some("RATE_LIMITED") => LineHold::Refused(LineRefusal::RateLimited {
            retry_after_ms: num(1)?,
        }),
        Some("LAPSED") => LineHold::Refused(LineRefusal::LapseLimit {
            lapsed: num(1)?,
            max: num(2)?,
        }),
        Some("LIMIT") => LineHold::Refused(LineRefusal::LimitExceeded {
            bought: num(1)?,
            limit: num(2)?,
        }),
        Some("SOLD_OUT") => LineHold::Refused(LineRefusal::SoldOut),
        Some(word @ ("SALE_NOT_STARTED" | "SALE_ENDED" | "PASS_REQUIRED")) => {
            let why = GateRefusal::from_script(word, reply.get(1).map(String::as_str));
            LineHold::Refused(LineRefusal::Gated(why.ok_or_else(bad)?))
        }
        Some("INSUFFICIENT") => LineHold::Refused(LineRefusal::Insufficient { available: num(1)? }),
        Some("CONTENDED") => {
            num(1)?;
            num(2)?;
            LineHold::Contended
        }
        _ => return Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_reply_of_the_hold_script_has_its_outcome() {
        let held = LineHold::Held { available_after: 4 };
        assert_eq!(parse_hold(&strings(&["OK", "4"])).unwrap(), held);
        assert_eq!(parse_hold(&strings(&["HELD", "4"])).unwrap(), held);
        assert_eq!(
            parse_hold(&strings(&["LIMIT", "1", "2"])).unwrap(),
            LineHold::Refused(LineRefusal::LimitExceeded {
                bought: 1,
                limit: 2
            })
        );
        assert_eq!(
            parse_hold(&strings(&["ABORTED"])).unwrap(),
            LineHold::Aborted
        );
        assert_eq!(
            parse_hold(&strings(&["CONTENDED", "0", "1"])).unwrap(),
            LineHold::Contended
        );
        for broken in [
            strings(&["OK"]),
            strings(&["DRY", "0"]),
            strings(&["CONTENDED"]),
            strings(&[]),
        ] {
            assert!(parse_hold(&broken).is_err(), "{broken:?}");
        }
    }
}
