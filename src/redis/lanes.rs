//! Lanes: the group commit of script calls. Concurrent requests for one key
//! (a bucket for reservations, the Redis for orders) are decided by one
//! script call that takes a list of them.
//!
//! Why: on a busy sale most of what Redis spends per decision is per call
//! (EVALSHA dispatch, the reply, a wake-up on each side), not per decision.
//! A batch script decides its requests one after the other, each against the
//! state the ones before it left, so one call for N requests answers what N
//! calls in the same order would.
//!
//! How (the group commit the publisher uses for confirms): each key has a
//! lane. A request for an idle lane is sent at once, alone: a quiet key never
//! waits for a window. Up to `redis.batch_in_flight` calls of a lane run at
//! once (pipelined on the connection, so Redis and stockd work side by side
//! instead of waiting for each other); requests that arrive while they are
//! all in flight queue and go together in the next call, in arrival order,
//! up to `redis.batch_max` of weight (a reservation weighs 1, an order its
//! lines; a call always takes at least one request). `redis.batch_linger_us`
//! (0 by default) lets a busy lane wait a little longer for a fuller batch.
//! Lanes of different keys run side by side. A lane with nothing queued is
//! dropped, so memory follows the keys in use, not every key ever seen.
//!
//! Failures stay per batch and per request: a Redis error (connection,
//! timeout) fails exactly the requests of its call; a command error while one
//! request is decided (`{'ERROR', …}` from the script) fails that request
//! alone. Either way a request whose decision was written before the error is
//! found by its replay.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use super::RedisError;

/// How the lanes cut batches (`redis.batch_*`).
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    /// Most weight per call; 1 = one call per request, no lanes.
    pub max: usize,
    /// Calls of one lane in flight at once.
    pub in_flight: usize,
    /// A busy lane's wait for a fuller batch.
    pub linger: Duration,
}

/// One batch script: what a lane calls, and on what.
pub trait BatchCall: Send + Sync + 'static {
    /// What a lane is for; every request of a call shares it.
    type Key: Hash + Eq + Send + Sync + 'static;
    /// One request.
    type Ask: Send + Sync + 'static;
    /// The histogram of requests per call.
    const BATCH_SIZE_METRIC: &'static str;

    /// What one request counts against [`Batching::max`].
    fn weight(_ask: &Self::Ask) -> usize {
        1
    }

    /// One script call for `asks`: one reply per ask, in order (the lanes
    /// check the count: [`Lanes::call_once`]).
    fn call<'a>(
        &'a self,
        key: &'a Self::Key,
        asks: &'a [&'a Self::Ask],
    ) -> impl Future<Output = Result<Vec<Vec<String>>, RedisError>> + Send + 'a;
}

/// A request waiting in a lane, and where its reply goes.
struct Pending<A> {
    ask: A,
    reply: oneshot::Sender<Result<Vec<String>, RedisError>>,
}

/// One key's queue, and how many tasks are sending its calls.
struct Lane<A> {
    queue: Vec<Pending<A>>,
    drivers: usize,
}

/// Every lane of one script, by key.
type LaneMap<C> = HashMap<Arc<<C as BatchCall>::Key>, Lane<<C as BatchCall>::Ask>>;

struct Inner<C: BatchCall> {
    script: C,
    /// `max` and `in_flight` at least 1.
    batching: Batching,
    /// Keyed by what a lane's driver calls on.
    lanes: Mutex<LaneMap<C>>,
}

/// The lanes of one batch script in one process.
pub struct Lanes<C: BatchCall> {
    inner: Arc<Inner<C>>,
}

impl<C: BatchCall> Clone for Lanes<C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<C: BatchCall> Lanes<C> {
    /// `batching.max` 1 means one call per request, sent by the request
    /// itself (no lane, no task).
    pub fn new(script: C, batching: Batching) -> Self {
        let batching = Batching {
            max: batching.max.max(1),
            in_flight: batching.in_flight.max(1),
            ..batching
        };
        Self {
            inner: Arc::new(Inner {
                script,
                batching,
                lanes: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn script(&self) -> &C {
        &self.inner.script
    }

    pub fn batching(&self) -> Batching {
        self.inner.batching
    }

    /// Exactly one script call for `asks`, outside the lanes: one reply per
    /// ask, in order, or an error.
    pub async fn call_once(
        &self,
        key: &C::Key,
        asks: &[&C::Ask],
    ) -> Result<Vec<Vec<String>>, RedisError> {
        self.inner.call_once(key, asks).await
    }

    /// Decides one request: alone when batching is off, else in its lane's
    /// next call.
    pub async fn submit(&self, key: C::Key, ask: C::Ask) -> Result<Vec<String>, RedisError> {
        if self.inner.batching.max == 1 {
            metrics::histogram!(C::BATCH_SIZE_METRIC).record(1.0);
            let mut replies = self.inner.call_once(&key, &[&ask]).await?;
            return Ok(replies
                .pop()
                .expect("call_once checked one reply per request"));
        }
        let (reply, answer) = oneshot::channel();
        let key = Arc::new(key);
        let start = {
            let mut lanes = self.inner.lanes.lock().expect("lanes lock");
            let lane = lanes.entry(key.clone()).or_insert_with(|| Lane {
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
            tokio::spawn(self.inner.clone().drive(key));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(RedisError::Pool("the batch was dropped".into())))
    }
}

impl<C: BatchCall> Inner<C> {
    /// Sends the lane's calls one after the other until its queue is empty;
    /// the last driver to leave drops the lane.
    async fn drive(self: Arc<Self>, key: Arc<C::Key>) {
        let Batching { max, linger, .. } = self.batching;
        let mut first = true;
        loop {
            if !first && !linger.is_zero() && self.queued_weight(&key) < max {
                tokio::time::sleep(linger).await;
            }
            first = false;
            let batch: Vec<Pending<C::Ask>> = {
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
                let take = take_by_weight(lane.queue.iter().map(|p| C::weight(&p.ask)), max);
                lane.queue.drain(..take).collect()
            };
            metrics::histogram!(C::BATCH_SIZE_METRIC).record(batch.len() as f64);
            let asks: Vec<&C::Ask> = batch.iter().map(|p| &p.ask).collect();
            match self.call_once(&key, &asks).await {
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

    /// One script call, its replies counted against its requests.
    async fn call_once(
        &self,
        key: &C::Key,
        asks: &[&C::Ask],
    ) -> Result<Vec<Vec<String>>, RedisError> {
        let replies = self.script.call(key, asks).await?;
        if replies.len() != asks.len() {
            return Err(RedisError::BadReply(format!(
                "{} replies for {} requests",
                replies.len(),
                asks.len()
            )));
        }
        Ok(replies)
    }

    fn queued_weight(&self, key: &C::Key) -> usize {
        let lanes = self.lanes.lock().expect("lanes lock");
        lanes
            .get(key)
            .map_or(0, |lane| lane.queue.iter().map(|p| C::weight(&p.ask)).sum())
    }
}

/// How many of a queue's first requests (given their weights) the next call
/// takes: as many as fit in `max` of weight, and always the first.
fn take_by_weight(weights: impl IntoIterator<Item = usize>, max: usize) -> usize {
    let mut weight = 0;
    let mut take = 0;
    for w in weights {
        weight += w;
        if take > 0 && weight > max {
            break;
        }
        take += 1;
    }
    take
}

#[cfg(test)]
mod tests {
    use super::take_by_weight;

    #[test]
    fn a_call_takes_what_fits_and_always_the_first() {
        assert_eq!(take_by_weight([1, 1, 1], 2), 2);
        assert_eq!(take_by_weight([3, 3, 3], 7), 2);
        assert_eq!(take_by_weight([3, 4], 7), 2);
        assert_eq!(
            take_by_weight([20, 1], 7),
            1,
            "a heavy first request goes alone"
        );
        assert_eq!(take_by_weight(Vec::<usize>::new(), 7), 0);
    }
}
