//! Orders in Redis: the admission of a whole order on a standalone Redis in
//! one script call (`order.lua`: every line held or none), and the order
//! record. Concurrent orders share calls: one lane per Redis (`lanes.rs`),
//! an order weighing its lines against `redis.batch_max`. Each line is held
//! as a reservation of its SKU whose request id is the order id
//! (`domain::order`), so the finish, extend and readmit scripts of single
//! reservations serve a line unchanged.
//!
//! Not this script's: a Redis Cluster, where the lines live in different
//! slots and no one script can span them, and split SKUs, whose lines live
//! in the buyer's bucket. The script refuses a split SKU's line (`SPLIT`),
//! and [`Orders::reserve`] refuses on a cluster before calling Redis; both
//! go through the intent protocol (`order_intents.rs`, `order_holds.rs`,
//! `ops/order_saga.rs`; docs/architecture.md, "Orders").

use std::sync::Arc;

use super::admission::ReserveArgs;
use super::core::Core;
use super::lanes::{BatchCall, Batching, Lanes};
use super::outbox::OutboxStream;
use super::reply_fields::Fields;
use super::RedisError;
use crate::domain::{
    GateRefusal, OrderLines, RequestId, Requester, ReservationStatus, SkuId, UserId,
};

/// Why one line of an order could not be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRefusal {
    /// The SKU is not in Redis (unknown, or not warmed up).
    NotLoaded,
    /// A split SKU: not on the standalone path.
    Split,
    /// The buyer's holds on the SKU that lapsed unpaid reached
    /// `limits.max_lapsed_holds`.
    LapseLimit {
        lapsed: u64,
        max: u64,
    },
    LimitExceeded {
        bought: u64,
        limit: u64,
    },
    /// The buyer is over `limits.per_user_rps` on the line's SKU: nothing
    /// held, nothing written.
    RateLimited {
        retry_after_ms: u64,
    },
    /// The SKU's sale terms refuse the line by Redis's clock
    /// (`lib/hold.lua`): not started, ended, or a pass required.
    Gated(GateRefusal),
    SoldOut,
    Insufficient {
        available: u64,
    },
}

/// One line as held: its outbox entry and the SKU's available after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLine {
    pub sku_id: SkuId,
    pub count: u32,
    /// The stream of the entry that carries this line: the SKU's
    /// (`order.lua`), or the order shard's for the first line of an order
    /// held line by line (whose other lines have no entry of their own).
    pub stream: OutboxStream,
    /// Empty when the line has no entry of its own.
    pub entry_id: String,
    pub available_after: u64,
}

/// What the order script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderOutcome {
    /// Every line is held.
    Reserved {
        created_ms: u64,
        expires_ms: u64,
        lines: Vec<HeldLine>,
    },
    /// The order was held before: its record as stored.
    Replayed {
        status: ReservationStatus,
        created_ms: u64,
        expires_ms: u64,
    },
    /// The order id was used with another buyer or other lines.
    Mismatch,
    /// The order id names another client's order (contract §6.2).
    Taken,
    /// The first line (in SKU order) that could not be held; nothing is held.
    Refused { sku_id: SkuId, why: LineRefusal },
    /// A line's outbox is full (the broker is not confirming).
    Backpressure,
    /// Orders are not served on this path (a Redis Cluster: `order.lua`
    /// cannot span the lines' slots; `ops/order_saga.rs` holds them).
    Unsupported,
    /// Nothing is held, and a retry may succeed: an attempt of this order
    /// id is in flight or being undone, the attempt ran past its deadline,
    /// or a split SKU's stock is moving between buckets. The reason.
    Retry(String),
}

impl OrderOutcome {
    /// The outcome as a span label (the answer's metric label is the
    /// route's: it tells refusals apart).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Reserved { .. } => "reserved",
            Self::Replayed { .. } => "replayed",
            Self::Mismatch => "mismatch",
            Self::Taken => "id_taken",
            Self::Refused { .. } => "refused",
            Self::Backpressure => "backpressure",
            Self::Unsupported => "unsupported",
            Self::Retry(_) => "retry",
        }
    }
}

/// One order as a lane queues it.
pub struct OrderAsk {
    pub order_id: RequestId,
    pub user_id: UserId,
    pub lines: OrderLines,
    /// Who asks (`Requester::script_arg`): the order's owner, and whether
    /// another client's order id is refused as taken.
    pub requester: String,
    /// The order carries a verified pass: its lines on SKUs with
    /// `requires_pass` may be held (`lib/hold.lua`, `hold_gate`).
    pub carries_pass: bool,
}

/// The order script as a lane calls it: one lane per Redis (every order of
/// a standalone Redis may share a call, whatever its SKUs).
pub struct OrderCall {
    core: Arc<Core>,
    args: ReserveArgs,
}

impl BatchCall for OrderCall {
    type Key = ();
    type Ask = OrderAsk;
    const BATCH_SIZE_METRIC: &'static str = "stockd_order_batch_size";

    /// An order weighs its lines: `redis.batch_max` bounds a call's keys.
    fn weight(ask: &OrderAsk) -> usize {
        ask.lines.len()
    }

    fn call<'a>(
        &'a self,
        _key: &'a (),
        asks: &'a [&'a OrderAsk],
    ) -> impl std::future::Future<Output = Result<Vec<Vec<String>>, RedisError>> + Send + 'a {
        let keys = &self.core.keys;
        let mut invocation = super::scripts::ORDER.prepare_invoke();
        invocation
            .arg(self.args.ttl_ms)
            .arg(self.args.retention_ms)
            .arg(self.args.outbox_max_len)
            .arg(keys.soldout_channel())
            .arg(self.args.max_lapsed)
            .arg(self.args.buyer_rate.0)
            .arg(self.args.buyer_rate.1);
        for ask in asks {
            let shard = super::keys::order_shard(&ask.order_id);
            invocation
                .key(keys.order(&ask.order_id))
                .key(keys.order_outbox(shard))
                .arg(ask.order_id.as_str())
                .arg(ask.user_id.get())
                .arg(ask.lines.encode())
                .arg(ask.lines.len())
                .arg(&ask.requester)
                .arg(if ask.carries_pass { "1" } else { "0" });
            for line in ask.lines.lines() {
                invocation
                    .key(keys.sku(line.sku_id))
                    .key(keys.reservation(line.sku_id, &ask.order_id))
                    .key(keys.user(line.sku_id, ask.user_id))
                    .key(keys.winners(line.sku_id))
                    .arg(line.sku_id.get())
                    .arg(line.count);
            }
        }
        async move {
            self.core
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await
        }
    }
}

/// The order script and record.
pub struct Orders {
    pub(super) core: Arc<Core>,
    /// Time to pay, record retention and outbox bound, as reservations have.
    pub(super) args: ReserveArgs,
    /// Concurrent orders share a script call (`lanes.rs`).
    lanes: Lanes<OrderCall>,
    /// A Redis Cluster: no script may span the lines' slots.
    cluster: bool,
}

impl Orders {
    /// `batching` as reservations have it; an order weighs its lines.
    pub(super) fn new(
        core: Arc<Core>,
        args: ReserveArgs,
        batching: Batching,
        cluster: bool,
    ) -> Self {
        let script = OrderCall {
            core: core.clone(),
            args,
        };
        Self {
            core,
            args,
            lanes: Lanes::new(script, batching),
            cluster,
        }
    }

    /// Takes the buyer's rules the reserve script enforces (the rate limit,
    /// the cap on lapsed holds): an order line is held to them as a
    /// reservation is. New lanes with the new arguments.
    pub(super) fn follow(&mut self, reservations: &ReserveArgs) {
        self.args.max_lapsed = reservations.max_lapsed;
        self.args.buyer_rate = reservations.buyer_rate;
        let script = OrderCall {
            core: self.core.clone(),
            args: self.args,
        };
        self.lanes = Lanes::new(script, self.lanes.batching());
    }

    /// Holds every line of the order or none, in one `order.lua` call
    /// (shared with the orders that queued beside it), asked by
    /// `requester`: the order names its client, and another client's order
    /// id is [`OrderOutcome::Taken`]. `carries_pass`: the order carries a
    /// verified pass (a line of a SKU with `requires_pass` needs one).
    pub async fn reserve(
        &self,
        order_id: &RequestId,
        user_id: UserId,
        lines: &OrderLines,
        requester: &Requester,
        carries_pass: bool,
    ) -> Result<OrderOutcome, RedisError> {
        if self.cluster {
            return Ok(OrderOutcome::Unsupported);
        }
        let ask = OrderAsk {
            order_id: order_id.clone(),
            user_id,
            lines: lines.clone(),
            requester: requester.script_arg(),
            carries_pass,
        };
        let reply = self.lanes.submit((), ask).await?;
        parse_reply(lines, super::keys::order_shard(order_id), &reply)
    }

    /// Decides `asks` in exactly one order script call, outside the lanes:
    /// one outcome per ask, in order. For tests and tools that need a batch
    /// of a known make-up; orders go through [`Self::reserve`].
    pub async fn decide_batch(
        &self,
        asks: &[OrderAsk],
    ) -> Result<Vec<Result<OrderOutcome, RedisError>>, RedisError> {
        let refs: Vec<&OrderAsk> = asks.iter().collect();
        let replies = self.lanes.call_once(&(), &refs).await?;
        Ok(asks
            .iter()
            .zip(replies)
            .map(|(ask, reply)| {
                let shard = super::keys::order_shard(&ask.order_id);
                parse_reply(&ask.lines, shard, &reply)
            })
            .collect())
    }
}

/// The newest order record format this release reads (the record's `v`;
/// absent reads as 1). A later release that changes the record bumps it, so
/// an older api node during a rolling upgrade answers 503 rather than
/// misread a record it does not know.
pub const ORDER_RECORD_FORMAT: u32 = 1;

/// An order's Redis record (`order.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRecord {
    pub user_id: UserId,
    pub lines: OrderLines,
    pub status: ReservationStatus,
    pub created_ms: u64,
    pub expires_ms: u64,
    /// Extensions mirrored onto the record (`ext`, `order_extend.lua`); 0
    /// before the first.
    pub extensions: u32,
    /// The client that placed it (`client`; contract §6.2); none: an order
    /// of no one. A field a release before owners ignores, so the record's
    /// `v` stays 1.
    pub client: Option<String>,
}

impl Orders {
    /// The order's record, if Redis still has it.
    pub async fn record(&self, order_id: &RequestId) -> Result<Option<OrderRecord>, RedisError> {
        let key = self.core.keys.order(order_id);
        let map: std::collections::HashMap<String, String> = self
            .core
            .run(|mut c| async move {
                deadpool_redis::redis::cmd("HGETALL")
                    .arg(&key)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        // No record, or an attempt held line by line that is not an order
        // (yet, or any more): HOLDING, ABORTING, ABORTED.
        let order_status = map.get("status").and_then(|s| ReservationStatus::parse(s));
        if map.is_empty() || order_status.is_none() {
            return Ok(None);
        }
        let bad = || RedisError::BadReply(format!("order record {map:?}"));
        let version = map.get("v").map_or(Ok(1), |v| v.parse::<u32>());
        if version.map_or(true, |v| v > ORDER_RECORD_FORMAT) {
            // A newer release's record: never read as something it is not.
            return Err(RedisError::BadReply(format!(
                "order record of format {:?}, newer than this release reads ({ORDER_RECORD_FORMAT})",
                map.get("v")
            )));
        }
        let field = |name: &str| map.get(name).ok_or_else(bad);
        let num = |name: &str| field(name)?.parse::<u64>().map_err(|_| bad());
        Ok(Some(OrderRecord {
            user_id: UserId::new(num("user")?).map_err(|_| bad())?,
            lines: OrderLines::decode(field("lines")?).map_err(|_| bad())?,
            status: ReservationStatus::parse(field("status")?).ok_or_else(bad)?,
            created_ms: num("created_ms")?,
            expires_ms: num("expires_ms")?,
            extensions: match map.get("ext") {
                None => 0,
                Some(ext) => ext.parse().map_err(|_| bad())?,
            },
            client: map.get("client").cloned(),
        }))
    }

    /// Mirrors the order's final status onto its record (`order_mark.lua`).
    pub async fn mark(
        &self,
        order_id: &RequestId,
        status: ReservationStatus,
    ) -> Result<(), RedisError> {
        let mut invocation = super::scripts::ORDER_MARK.prepare_invoke();
        invocation
            .key(self.core.keys.order(order_id))
            .arg(status.as_str());
        self.core
            .run(|mut c| async move { invocation.invoke_async::<i64>(&mut c).await })
            .await
            .map(|_| ())
    }
}

impl Orders {
    /// Mirrors an extension MySQL granted onto the order's record
    /// (`order_extend.lua`); the lines are mirrored as reservations.
    pub async fn extend_record(
        &self,
        order_id: &RequestId,
        expires_ms: u64,
        extensions: u32,
    ) -> Result<(), RedisError> {
        let mut invocation = super::scripts::ORDER_EXTEND.prepare_invoke();
        invocation
            .key(self.core.keys.order(order_id))
            .arg(expires_ms)
            .arg(self.args.retention_ms)
            .arg(extensions);
        self.core
            .run(|mut c| async move { invocation.invoke_async::<i64>(&mut c).await })
            .await
            .map(|_| ())
    }
}

fn parse_reply(
    lines: &OrderLines,
    shard: u8,
    reply: &[String],
) -> Result<OrderOutcome, RedisError> {
    let fields = Fields::new("order script", reply);
    let (bad, num) = (|| fields.bad(), |i| fields.num(i));
    Ok(match reply.first().map(String::as_str) {
        Some("OK") => {
            if reply.len() != 4 + lines.len() {
                return Err(bad());
            }
            let entry_id = reply.get(3).ok_or_else(bad)?;
            let mut held = Vec::with_capacity(lines.len());
            for (i, line) in lines.lines().iter().enumerate() {
                // The order's one entry rides on its first line.
                let (stream, entry_id) = match i {
                    0 => (
                        OutboxStream::of_order_shard(shard, line.sku_id),
                        entry_id.clone(),
                    ),
                    _ => (OutboxStream::of_sku(line.sku_id), String::new()),
                };
                held.push(HeldLine {
                    sku_id: line.sku_id,
                    count: line.count,
                    stream,
                    entry_id,
                    available_after: num(4 + i)?,
                });
            }
            OrderOutcome::Reserved {
                created_ms: num(1)?,
                expires_ms: num(2)?,
                lines: held,
            }
        }
        Some("REPLAY") => OrderOutcome::Replayed {
            status: fields.status(1)?,
            created_ms: num(2)?,
            expires_ms: num(3)?,
        },
        Some("MISMATCH") => OrderOutcome::Mismatch,
        Some("TAKEN") => OrderOutcome::Taken,
        Some("ERROR") => {
            return Err(RedisError::Script(
                reply.get(1).cloned().unwrap_or_default(),
            ))
        }
        Some("BACKPRESSURE") => OrderOutcome::Backpressure,
        Some("BUSY") => OrderOutcome::Retry(
            "the order id is being held or undone by another request; retry shortly".into(),
        ),
        Some("REFUSED") => {
            let index = usize::try_from(num(1)?).map_err(|_| bad())?;
            let line = index
                .checked_sub(1)
                .and_then(|i| lines.lines().get(i))
                .ok_or_else(bad)?;
            let why = match reply.get(2).map(String::as_str) {
                Some("NOT_LOADED") => LineRefusal::NotLoaded,
                Some("SPLIT") => LineRefusal::Split,
                Some("LAPSED") => LineRefusal::LapseLimit {
                    lapsed: num(3)?,
                    max: num(4)?,
                },
                Some("LIMIT") => LineRefusal::LimitExceeded {
                    bought: num(3)?,
                    limit: num(4)?,
                },
                Some("RATE") => LineRefusal::RateLimited {
                    retry_after_ms: num(3)?,
                },
                Some("SOLD_OUT") => LineRefusal::SoldOut,
                Some("INSUFFICIENT") => LineRefusal::Insufficient { available: num(3)? },
                Some(word) => LineRefusal::Gated(
                    GateRefusal::from_script(word, reply.get(3).map(String::as_str))
                        .ok_or_else(bad)?,
                ),
                None => return Err(bad()),
            };
            OrderOutcome::Refused {
                sku_id: line.sku_id,
                why,
            }
        }
        _ => return Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::OrderLine;

    fn two_lines() -> OrderLines {
        let line = |sku, count| OrderLine {
            sku_id: SkuId::new(sku).unwrap(),
            count,
        };
        OrderLines::new(vec![line(3, 1), line(1, 2)], 20).unwrap()
    }

    fn strings(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_held_order_names_each_line_in_sku_order() {
        let reply = strings(&["OK", "10", "20", "1-0", "4", "0"]);
        let OrderOutcome::Reserved { lines, .. } = parse_reply(&two_lines(), 3, &reply).unwrap()
        else {
            panic!("not reserved")
        };
        assert_eq!(lines[0].sku_id.get(), 1);
        assert_eq!((lines[0].count, lines[0].available_after), (2, 4));
        assert_eq!(lines[0].entry_id, "1-0");
        assert_eq!(lines[0].stream.order_shard, Some(3));
        assert_eq!(
            (lines[1].entry_id.as_str(), lines[1].available_after),
            ("", 0)
        );
    }

    #[test]
    fn a_refusal_names_its_line_and_a_broken_reply_is_an_error() {
        let reply = strings(&["REFUSED", "2", "LIMIT", "1", "1"]);
        assert_eq!(
            parse_reply(&two_lines(), 0, &reply).unwrap(),
            OrderOutcome::Refused {
                sku_id: SkuId::new(3).unwrap(),
                why: LineRefusal::LimitExceeded {
                    bought: 1,
                    limit: 1
                },
            }
        );
        for broken in [
            strings(&["REFUSED", "3", "SOLD_OUT"]),
            strings(&["REFUSED", "0", "SOLD_OUT"]),
            strings(&["OK", "1", "2", "1-0"]),
            strings(&["OK", "1", "2", "1-0", "4", "0", "9"]),
            strings(&["WHAT"]),
        ] {
            assert!(parse_reply(&two_lines(), 0, &broken).is_err(), "{broken:?}");
        }
    }
}
