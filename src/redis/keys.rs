//! Every Redis key stockd uses is built here, nowhere else.
//!
//! The layout — every key, its type and what it holds — is documented once, in
//! docs/architecture.md, "Key layout" (a docs check, `tests/it/docs/redis_keys.rs`,
//! compares that table with the builders below). Every key carries the prefix
//! (`stockd:` by default) and, but for the few global ones, a Redis Cluster hash
//! tag (`{<sku>}`, a bucket's tag, or an order shard's `{oi:<n>}`), so every key
//! one script touches lives in one slot.
//!
//! A SKU split into buckets (`redis/buckets`) keeps bucket 0 under the tag
//! `{<sku>}` (today's keys, plus `pool`, `buckets` and `tags` in its hash) and
//! bucket b ≥ 1 under its own tag `{<tag_b>}` from the hash's `tags` field:
//! the same per-bucket keys (`sku`, `user`, `res`, `outbox`, `winners`).
//!
//! The sold-out channel is a plain channel: on Redis Cluster a `PUBLISH` reaches
//! every node's subscribers, so one channel serves all SKUs.
//!
//! Ids reach this module only as validated domain types, so no caller can inject
//! `{`, `}` or `*` into a key.

use crate::domain::{RequestId, SkuId, UserId};

#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: &str) -> Self {
        assert!(
            !prefix.contains('{') && !prefix.contains('}'),
            "key prefix must not contain a hash tag"
        );
        Self {
            prefix: prefix.to_string(),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<prefix>{<tag>}:<suffix>`, the layout of every tagged key, each made
    /// of parts pushed into one string sized once: keys are built on every
    /// call of the hot path, and `format!` costs several times as much.
    fn key(&self, tag: &[&str], suffix: &[&str]) -> String {
        let len = |parts: &[&str]| parts.iter().map(|p| p.len()).sum::<usize>();
        let mut key = String::with_capacity(self.prefix.len() + len(tag) + len(suffix) + 3);
        key.push_str(&self.prefix);
        key.push('{');
        tag.iter().for_each(|p| key.push_str(p));
        key.push_str("}:");
        suffix.iter().for_each(|p| key.push_str(p));
        key
    }

    /// A key of a SKU's bucket 0 (its tag is the SKU id).
    fn tagged(&self, sku: SkuId, suffix: &[&str]) -> String {
        self.key(&[Decimal::new().of(sku.get())], suffix)
    }

    fn at(&self, tag: &str, suffix: &[&str]) -> String {
        self.key(&[tag], suffix)
    }

    /// A key of a buyer's own (`budget`, `pass:<id>`): the tag `u<user_id>`,
    /// never a SKU's (a SKU's tag is its bare id, a bucket's its `tags`
    /// entry), so on a cluster every key of one buyer shares a slot.
    fn of_buyer(&self, user: UserId, suffix: &[&str]) -> String {
        self.key(&["u", Decimal::new().of(user.get())], suffix)
    }

    /// A key of an order shard: the tag `oi:<n>`.
    fn of_order_shard(&self, shard: u8, suffix: &[&str]) -> String {
        self.key(&["oi:", Decimal::new().of(u64::from(shard))], suffix)
    }

    /// The stock hash of one bucket of a SKU (bucket 0's tag is the SKU id, so
    /// `sku_at(&sku.to_string())` is [`Keys::sku`]). See `redis/buckets`.
    pub fn sku_at(&self, tag: &str) -> String {
        self.at(tag, &["sku"])
    }

    pub fn user_at(&self, tag: &str, user: UserId) -> String {
        self.at(tag, &["user:", Decimal::new().of(user.get())])
    }

    pub fn reservation_at(&self, tag: &str, request: &RequestId) -> String {
        self.at(tag, &["res:", request.as_str()])
    }

    pub fn reservation_prefix_at(&self, tag: &str) -> String {
        self.at(tag, &["res:"])
    }

    pub fn outbox_at(&self, tag: &str) -> String {
        self.at(tag, &["outbox"])
    }

    pub fn winners_at(&self, tag: &str) -> String {
        self.at(tag, &["winners"])
    }

    /// Transfers of stock out of this bucket not yet settled: id -> `dest:units:ms`.
    pub fn transfers_out_at(&self, tag: &str) -> String {
        self.at(tag, &["xout"])
    }

    /// Ids of transfers already credited to this bucket (kept an hour, so a
    /// re-sent credit is a no-op).
    pub fn transfers_in_at(&self, tag: &str) -> String {
        self.at(tag, &["xin"])
    }

    pub fn sku(&self, sku: SkuId) -> String {
        self.tagged(sku, &["sku"])
    }

    pub fn user(&self, sku: SkuId, user: UserId) -> String {
        self.tagged(sku, &["user:", Decimal::new().of(user.get())])
    }

    pub fn reservation(&self, sku: SkuId, request: &RequestId) -> String {
        self.tagged(sku, &["res:", request.as_str()])
    }

    /// Prefix of every reservation key of one SKU (for scripts that build them).
    pub fn reservation_prefix(&self, sku: SkuId) -> String {
        self.tagged(sku, &["res:"])
    }

    /// Marks one restock as applied (`load_sku.lua`), so a re-sent script
    /// does not apply its delta twice.
    pub fn load_op(&self, sku: SkuId, op_id: &str) -> String {
        self.tagged(sku, &["op:", op_id])
    }

    /// Cuts Redis took before their MySQL commit and not yet settled:
    /// step id -> `units:ms` (`load_sku.lua`, `cut_settle.lua`).
    pub fn cuts(&self, sku: SkuId) -> String {
        self.tagged(sku, &["cuts"])
    }

    pub fn outbox(&self, sku: SkuId) -> String {
        self.tagged(sku, &["outbox"])
    }

    pub fn winners(&self, sku: SkuId) -> String {
        self.tagged(sku, &["winners"])
    }

    /// The record of an order (`order.lua`, `order_intent.lua`: user, lines,
    /// status, times, attempt), under its shard's tag: on a cluster it lives
    /// in one slot with the shard's intent index and order outbox.
    pub fn order(&self, order_id: &RequestId) -> String {
        self.of_order_shard(order_shard(order_id), &["order:", order_id.as_str()])
    }

    /// The intents of one order shard still holding or being undone (zset,
    /// score = the deadline in Redis ms), scanned by the sweeper.
    pub fn order_intents(&self, shard: u8) -> String {
        self.of_order_shard(shard, &["intents"])
    }

    /// The outbox stream of one order shard: orders held line by line.
    pub fn order_outbox(&self, shard: u8) -> String {
        self.of_order_shard(shard, &["outbox"])
    }

    /// The highest attempt of an order undone on one bucket (`order_release.lua`).
    pub fn order_tombstone_at(&self, tag: &str, order_id: &RequestId) -> String {
        self.at(tag, &["otomb:", order_id.as_str()])
    }

    /// The units uncommitted order attempts hold on one bucket: order id ->
    /// `count:deadline_ms` (`order_hold.lua`).
    pub fn order_pending_at(&self, tag: &str) -> String {
        self.at(tag, &["opend"])
    }

    /// A buyer's hold budget (`limits.buyer_max_live_units`,
    /// `budget_claim.lua`): `t` the live units claimed, one field per held
    /// line `<sku>:<hold_id>` -> `units:deadline_ms`. Under the buyer's own
    /// tag `u<user_id>` (shared with the pass claims): on a cluster it lives in a slot of its own, apart
    /// from the SKUs the buyer holds.
    pub fn budget(&self, user: UserId) -> String {
        self.of_buyer(user, &["budget"])
    }

    /// Which hold claimed an admission pass (`pass_claim.lua`): the buyer's
    /// tag `{u<user>}`, so every key of one buyer shares a slot, and the
    /// pass id (`jti`, the request-id alphabet).
    pub fn pass(&self, user: UserId, pass_id: &RequestId) -> String {
        self.of_buyer(user, &["pass:", pass_id.as_str()])
    }

    /// Pub/Sub channel of sold-out (`S:<sku>`) and available-again (`A:<sku>`)
    /// events, and of changed sale terms (`T:<sku>`, `sale/subscriber.rs`):
    /// one channel, so the Redis ACL of a deployment names one.
    pub fn soldout_channel(&self) -> String {
        [self.prefix.as_str(), "soldout"].concat()
    }

    /// A warm-up probe that came through the deduct queue (`redis/probes.rs`).
    pub fn probe(&self, id: &str) -> String {
        format!("{}probe:{id}", self.prefix)
    }

    /// Set of every SKU id ever loaded; read by background loops, never by the hot path.
    pub fn registry(&self) -> String {
        format!("{}skus", self.prefix)
    }

    /// Hash of the processes heard from (`ops/overview/nodes.rs`): field
    /// `host:pid`, value its last heartbeat on Redis' clock.
    pub fn nodes(&self) -> String {
        format!("{}nodes", self.prefix)
    }
}

/// Order shards: an order's record, its intent and its outbox entry live
/// under the tag `oi:<n>` of one of them.
pub const ORDER_SHARDS: u8 = 16;

/// The shard of an order id (FNV-1a of its bytes): stable across processes
/// and releases, as the keys it names must be.
pub fn order_shard(order_id: &RequestId) -> u8 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in order_id.as_str().bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash % u32::from(ORDER_SHARDS)) as u8
}

/// A number's decimal digits, written without `format!` (`itoa`).
struct Decimal(itoa::Buffer);

impl Decimal {
    fn new() -> Self {
        Self(itoa::Buffer::new())
    }

    fn of(&mut self, n: u64) -> &str {
        self.0.format(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_of_one_sku_share_its_hash_tag() {
        let keys = Keys::new("stockd:");
        let sku = SkuId::new(42).unwrap();
        let user = UserId::new(7).unwrap();
        let rid = RequestId::parse("r-1").unwrap();
        for key in [
            keys.sku(sku),
            keys.user(sku, user),
            keys.reservation(sku, &rid),
            keys.outbox(sku),
            keys.winners(sku),
            keys.load_op(sku, "op1"),
        ] {
            assert!(key.starts_with("stockd:{42}:"), "{key}");
        }
        assert_eq!(keys.reservation(sku, &rid), "stockd:{42}:res:r-1");
    }

    #[test]
    fn an_order_record_shares_its_shard_tag_with_the_intents_and_the_outbox() {
        let keys = Keys::new("p:");
        let order = RequestId::parse("order-1").unwrap();
        let shard = order_shard(&order);
        assert!(shard < ORDER_SHARDS);
        let tag = format!("p:{{oi:{shard}}}:");
        for key in [
            keys.order(&order),
            keys.order_intents(shard),
            keys.order_outbox(shard),
        ] {
            assert!(key.starts_with(&tag), "{key}");
        }
        let user = UserId::new(7).unwrap();
        assert_eq!(keys.budget(user), "p:{u7}:budget");
        // Fixed for good: another value would lose every live order record.
        assert_eq!(order_shard(&RequestId::parse("a").unwrap()), 0xc);
    }

    #[test]
    #[should_panic(expected = "hash tag")]
    fn a_prefix_with_braces_is_refused() {
        Keys::new("a{b}:");
    }
}
