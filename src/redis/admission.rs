//! Batch admission: concurrent reservations for one bucket (one SKU, or one
//! bucket of a split SKU) decided by one reserve script call.
//!
//! Why: on a busy sale most of what Redis spends per reservation is per call
//! (EVALSHA dispatch, the reply, a wake-up on each side), not per decision.
//! `reserve.lua` takes a list of requests and decides them one after the
//! other, each against the state the ones before it left, so one call for N
//! requests answers what N calls in the same order would.
//!
//! How (the group commit the publisher uses for confirms): each bucket has a
//! lane. A request for an idle lane is sent at once, alone: a quiet SKU never
//! waits for a window. Up to `redis.batch_in_flight` calls of a lane run at
//! once (pipelined on the connection, so Redis and stockd work side by side
//! instead of waiting for each other); requests that arrive while they are
//! all in flight queue and go together in the next call, in arrival order,
//! up to `redis.batch_max`. `redis.batch_linger_us` (0 by default) lets a busy
//! lane wait a little longer for a fuller batch. Lanes of different buckets
//! run side by side. A lane with nothing queued is dropped, so memory follows
//! the buckets being bought, not every bucket ever seen.
//!
//! Failures stay per batch and per request: a Redis error (connection,
//! timeout) fails exactly the requests of its call, each with today's 503;
//! a command error while one request is decided (`{'ERROR', …}` from the
//! script) fails that request alone. Either way a request whose decision was
//! written before the error is found by its replay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::core::Core;
use super::RedisError;
use crate::domain::{RequestId, SkuId, UserId};

/// What every reserve call passes besides the requests: the reservation's
/// time to pay, the record's retention, the outbox bound, the buyer rate limit.
#[derive(Debug, Clone, Copy)]
pub struct ReserveArgs {
    pub ttl_ms: u64,
    pub retention_ms: u64,
    pub outbox_max_len: u64,
    /// Per-buyer attempts per second and burst (`limits.per_user_*`; 0 = off).
    pub buyer_rate: (f64, u32),
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

/// One request of a call.
#[derive(Debug, Clone)]
pub struct Ask {
    pub request_id: RequestId,
    pub user_id: UserId,
    pub count: u32,
}

/// One reserve script call for `asks` on `target`: one reply per ask, in order.
pub async fn call(
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
        .arg(&target.subject);
    for ask in asks {
        invocation
            .key(core.keys.reservation_at(tag, &ask.request_id))
            .key(core.keys.user_at(tag, ask.user_id))
            .arg(ask.request_id.as_str())
            .arg(ask.user_id.get())
            .arg(ask.count);
    }
    let replies: Vec<Vec<String>> = core
        .run(|mut c| async move { invocation.invoke_async(&mut c).await })
        .await?;
    if replies.len() != asks.len() {
        return Err(RedisError::BadReply(format!(
            "{} replies for {} requests",
            replies.len(),
            asks.len()
        )));
    }
    Ok(replies)
}

/// A request waiting in a lane, and where its reply goes.
struct Pending {
    ask: Ask,
    reply: oneshot::Sender<Result<Vec<String>, RedisError>>,
}

/// One bucket's queue, and how many tasks are sending its calls.
struct Lane {
    queue: Vec<Pending>,
    drivers: usize,
}

/// How the lanes cut batches (`redis.batch_*`).
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Most requests per call; 1 = one call per reservation, no lanes.
    pub max: usize,
    /// Calls of one lane in flight at once.
    pub in_flight: usize,
    /// A busy lane's wait for a fuller batch.
    pub linger: Duration,
}

struct Inner {
    core: Arc<Core>,
    args: ReserveArgs,
    /// `max` and `in_flight` at least 1.
    batching: Batching,
    /// Keyed by the bucket; the key is what a lane's driver calls on.
    lanes: Mutex<HashMap<Arc<BucketTarget>, Lane>>,
}

/// The lanes of one process (one per `Reservations`).
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Inner>,
}

impl Admission {
    /// `batch_max` 1 means one call per reservation, sent by the request
    /// itself (no lane, no task).
    pub fn new(core: Arc<Core>, args: ReserveArgs, batching: Batching) -> Self {
        let batching = Batching {
            max: batching.max.max(1),
            in_flight: batching.in_flight.max(1),
            ..batching
        };
        Self {
            inner: Arc::new(Inner {
                core,
                args,
                batching,
                lanes: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// New, empty lanes with other script arguments and the same batching.
    pub fn with_args(&self, args: ReserveArgs) -> Self {
        Self::new(self.inner.core.clone(), args, self.inner.batching)
    }

    pub fn args(&self) -> &ReserveArgs {
        &self.inner.args
    }

    /// Decides one request: alone when batching is off, else in its lane's
    /// next call.
    pub async fn reserve(&self, target: BucketTarget, ask: Ask) -> Result<Vec<String>, RedisError> {
        if self.inner.batching.max == 1 {
            metrics::histogram!("stockd_reserve_batch_size").record(1.0);
            let mut replies = call(&self.inner.core, &self.inner.args, &target, &[&ask]).await?;
            return Ok(replies.pop().expect("call checks one reply per request"));
        }
        let (reply, answer) = oneshot::channel();
        let target = Arc::new(target);
        let start = {
            let mut lanes = self.inner.lanes.lock().expect("lanes lock");
            let lane = lanes.entry(target.clone()).or_insert_with(|| Lane {
                queue: Vec::new(),
                drivers: 0,
            });
            lane.queue.push(Pending { ask, reply });
            let room = lane.drivers < self.inner.batching.in_flight;
            if room {
                lane.drivers += 1;
            }
            room
        };
        if start {
            tokio::spawn(self.inner.clone().drive(target));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(RedisError::Pool("the admission batch was dropped".into())))
    }
}

impl Inner {
    /// Sends the lane's calls one after the other until its queue is empty;
    /// the last driver to leave drops the lane.
    async fn drive(self: Arc<Self>, key: Arc<BucketTarget>) {
        let Batching { max, linger, .. } = self.batching;
        let mut first = true;
        loop {
            if !first && !linger.is_zero() && self.queued(&key) < max {
                tokio::time::sleep(linger).await;
            }
            first = false;
            let batch: Vec<Pending> = {
                let mut lanes = self.lanes.lock().expect("lanes lock");
                let Some(lane) = lanes.get_mut(&key) else {
                    return;
                };
                if lane.queue.is_empty() {
                    lane.drivers -= 1;
                    if lane.drivers == 0 {
                        lanes.remove(&key);
                    }
                    return;
                }
                let take = lane.queue.len().min(max);
                lane.queue.drain(..take).collect()
            };
            metrics::histogram!("stockd_reserve_batch_size").record(batch.len() as f64);
            let asks: Vec<&Ask> = batch.iter().map(|p| &p.ask).collect();
            match call(&self.core, &self.args, &key, &asks).await {
                Ok(replies) => {
                    for (pending, reply) in batch.into_iter().zip(replies) {
                        let _ = pending.reply.send(Ok(reply));
                    }
                }
                Err(err) => {
                    let shared = Arc::new(err);
                    for pending in batch {
                        let _ = pending.reply.send(Err(RedisError::Batch(shared.clone())));
                    }
                }
            }
        }
    }

    fn queued(&self, key: &BucketTarget) -> usize {
        let lanes = self.lanes.lock().expect("lanes lock");
        lanes.get(key).map_or(0, |lane| lane.queue.len())
    }
}
