//! Batch admission: concurrent reservations for one bucket (one SKU, or one
//! bucket of a split SKU) decided by one reserve script call, in the bucket's
//! lane (`lanes.rs`: why and how calls are batched). `reserve.lua` takes a
//! list of requests and decides them one after the other, each against the
//! state the ones before it left, so one call for N requests answers what N
//! calls in the same order would. Lanes of different buckets run side by
//! side.

use std::sync::Arc;

use super::buckets::Layout;
use super::core::Core;
pub use super::lanes::Batching;
use super::lanes::{BatchCall, Lanes};
use super::RedisError;
#[cfg(doc)]
use crate::domain::Requester;
use crate::domain::{RequestId, SkuId, UserId};

/// What every reserve call passes besides the requests: the reservation's
/// time to pay, the record's retention, the outbox bound, the buyer rate limit,
/// the cap on lapsed holds.
#[derive(Debug, Clone, Copy)]
pub struct ReserveArgs {
    pub ttl_ms: u64,
    pub retention_ms: u64,
    pub outbox_max_len: u64,
    /// Per-buyer attempts per second and burst (`limits.per_user_*`; 0 = off).
    pub buyer_rate: (f64, u32),
    /// Holds of a buyer on a SKU that may lapse before the buyer is refused
    /// there (`limits.max_lapsed_holds`; 0 = off). Orders pass it too.
    pub max_lapsed: u32,
}

/// The bucket a call runs on, as the caller's layout routed it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BucketTarget {
    pub sku: SkuId,
    pub bucket: u16,
    /// The layout's bucket count (the script answers LAYOUT when it moved).
    pub n: u16,
    /// The bucket's hash tag: every key of the call lives in its slot.
    pub tag: String,
    /// The sold-out broadcast's subject (`<sku>` or `<sku>.<bucket>`).
    pub subject: String,
}

impl BucketTarget {
    /// The bucket `bucket` of `layout` as a reserve call names it.
    pub(super) fn of(layout: &Layout, bucket: u16) -> Self {
        Self {
            sku: layout.sku(),
            bucket,
            n: layout.n(),
            tag: layout.tag(bucket).to_string(),
            subject: layout.event_subject(bucket),
        }
    }
}

/// One request of a call.
#[derive(Debug, Clone)]
pub struct Ask {
    pub request_id: RequestId,
    pub user_id: UserId,
    pub count: u32,
    /// Who asks ([`Requester::script_arg`]): the owner the record gets and
    /// whether another's record is refused as taken.
    pub requester: String,
    /// The pass the request carries (`lib/hold.lua`'s `hold_gate` admits a
    /// SKU with `requires_pass` only with one).
    pub pass: PassArg,
}

/// A request's pass, as the reserve script takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassArg {
    /// No verified pass.
    None,
    /// A verified pass claimed by its own call (`pass_claims.rs`).
    Claimed,
    /// A verified pass the script claims for the hold, in the admission
    /// itself (`lib/pass.lua`): the buyer's pass `pass_id`, kept until
    /// `keep_until_ms`. Only where the script can reach the claim's key: a
    /// standalone Redis.
    ClaimHere {
        user_id: UserId,
        pass_id: RequestId,
        keep_until_ms: u64,
    },
}

/// One reserve script call for `asks` on `target` (its replies, counted by
/// the lanes).
async fn call(
    core: &Core,
    args: &ReserveArgs,
    target: &BucketTarget,
    asks: &[&Ask],
) -> Result<Vec<Vec<String>>, RedisError> {
    let tag = target.tag.as_str();
    let mut invocation = super::scripts::RESERVE.prepare_invoke();
    invocation
        .key(core.keys.sku_at(tag))
        .key(core.keys.outbox_at(tag))
        .key(core.keys.winners_at(tag))
        .arg(target.sku.get())
        .arg(args.ttl_ms)
        .arg(args.retention_ms)
        .arg(args.outbox_max_len)
        .arg(core.keys.soldout_channel())
        .arg(args.buyer_rate.0)
        .arg(args.buyer_rate.1)
        .arg(target.n)
        .arg(&target.subject)
        .arg(args.max_lapsed);
    // The claims' keys follow every request's two keys: KEYS[k] of a
    // request's `<k>:<keep_until_ms>`.
    let mut claim_keys = Vec::new();
    for ask in asks {
        invocation
            .key(core.keys.reservation_at(tag, &ask.request_id))
            .key(core.keys.user_at(tag, ask.user_id))
            .arg(ask.request_id.as_str())
            .arg(ask.user_id.get())
            .arg(ask.count)
            .arg(&ask.requester);
        match &ask.pass {
            PassArg::None => invocation.arg("0"),
            PassArg::Claimed => invocation.arg("1"),
            PassArg::ClaimHere {
                user_id,
                pass_id,
                keep_until_ms,
            } => {
                claim_keys.push(core.keys.pass(*user_id, pass_id));
                let k = 3 + 2 * asks.len() + claim_keys.len();
                invocation.arg(claim_arg(k, *keep_until_ms))
            }
        };
    }
    for key in claim_keys {
        invocation.key(key);
    }
    core.run(|mut c| async move { invocation.invoke_async(&mut c).await })
        .await
}

/// A claim's argument, `<k>:<keep_until_ms>` (`lib/pass.lua`): KEYS[k] is
/// the claim's key. Written without `format!`: it goes with every
/// reservation that carries a pass.
fn claim_arg(k: usize, keep_until_ms: u64) -> String {
    let (mut key, mut until) = (itoa::Buffer::new(), itoa::Buffer::new());
    [key.format(k), ":", until.format(keep_until_ms)].concat()
}

/// The reserve script as a lane calls it.
pub struct ReserveCall {
    core: Arc<Core>,
    args: ReserveArgs,
}

impl BatchCall for ReserveCall {
    type Key = BucketTarget;
    type Ask = Ask;
    const BATCH_SIZE_METRIC: &'static str = "stockd_reserve_batch_size";

    fn call<'a>(
        &'a self,
        key: &'a BucketTarget,
        asks: &'a [&'a Ask],
    ) -> impl std::future::Future<Output = Result<Vec<Vec<String>>, RedisError>> + Send + 'a {
        call(&self.core, &self.args, key, asks)
    }
}

/// The reserve lanes of one process (one per `Reservations`).
#[derive(Clone)]
pub struct Admission {
    lanes: Lanes<ReserveCall>,
}

impl Admission {
    /// `batch_max` 1 means one call per reservation, sent by the request
    /// itself (no lane, no task).
    pub fn new(core: Arc<Core>, args: ReserveArgs, batching: Batching) -> Self {
        Self {
            lanes: Lanes::new(ReserveCall { core, args }, batching),
        }
    }

    /// New, empty lanes with other script arguments and the same batching.
    pub fn with_args(&self, args: ReserveArgs) -> Self {
        let core = self.lanes.script().core.clone();
        Self::new(core, args, self.lanes.batching())
    }

    pub fn args(&self) -> &ReserveArgs {
        &self.lanes.script().args
    }

    /// Exactly one reserve call for `asks` on `target`, outside the lanes.
    pub async fn call_once(
        &self,
        target: &BucketTarget,
        asks: &[&Ask],
    ) -> Result<Vec<Vec<String>>, RedisError> {
        self.lanes.call_once(target, asks).await
    }

    /// Decides one request: alone when batching is off, else in its lane's
    /// next call.
    pub async fn reserve(&self, target: BucketTarget, ask: Ask) -> Result<Vec<String>, RedisError> {
        self.lanes.submit(target, ask).await
    }
}
