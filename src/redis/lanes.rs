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
//!
//! Limits (issue 51): a lane queues at most `redis.batch_queue_max` of weight;
//! past it a request is refused at once (503), never queued without bound. A
//! request whose caller has stopped waiting (its bound passed: it answered
//! 503 already) is dropped from its batch, never sent. A driver is uncounted
//! however it ends — also when its task is dropped with its runtime (a worker
//! stopping first in a graceful shutdown) — and the last one to go fails what
//! is still queued, so no request waits for a driver that is gone.

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
    /// Most weight queued in one lane (beside the calls in flight).
    pub queue_max: usize,
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
            queue_max: batching.queue_max.max(1),
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
            let queued: usize = lane.queue.iter().map(|p| C::weight(&p.ask)).sum();
            if !lane.queue.is_empty() && queued + C::weight(&ask) > self.inner.batching.queue_max {
                metrics::counter!("stockd_lane_queue_full_total").increment(1);
                return Err(RedisError::Pool(format!(
                    "{queued} requests already queued for this key (redis.batch_queue_max)"
                )));
            }
            lane.queue.push(Pending { ask, reply });
            let room = lane.drivers < self.inner.batching.in_flight;
            if room {
                lane.drivers += 1;
            }
            room
        };
        if start {
            let slot = DriverSlot {
                inner: self.inner.clone(),
                key,
                counted: true,
            };
            tokio::spawn(slot.drive());
        }
        answer
            .await
            .unwrap_or_else(|_| Err(RedisError::Pool("the batch was dropped".into())))
    }
}

/// A lane's driver: sends the lane's calls one after the other until its
/// queue is empty. It is counted in `Lane::drivers` from its spawn until it
/// is dropped, however that happens ([`Drop`] below).
struct DriverSlot<C: BatchCall> {
    inner: Arc<Inner<C>>,
    key: Arc<C::Key>,
    /// Still counted in its lane: cleared where the driver leaves an empty
    /// queue (under the lock that saw it empty, so a request queued right
    /// after starts a driver of its own).
    counted: bool,
}

impl<C: BatchCall> DriverSlot<C> {
    async fn drive(mut self) {
        let Batching { max, linger, .. } = self.inner.batching;
        let mut first = true;
        loop {
            if !first && !linger.is_zero() && self.inner.queued_weight(&self.key) < max {
                tokio::time::sleep(linger).await;
            }
            first = false;
            let batch: Vec<Pending<C::Ask>> = {
                let mut lanes = self.inner.lanes.lock().expect("lanes lock");
                let Some(lane) = lanes.get_mut(&self.key) else {
                    self.counted = false;
                    return;
                };
                if lane.queue.is_empty() {
                    lane.drivers -= 1;
                    if lane.drivers == 0 {
                        lanes.remove(&self.key);
                    }
                    self.counted = false;
                    return;
                }
                let take = take_by_weight(lane.queue.iter().map(|p| C::weight(&p.ask)), max);
                lane.queue.drain(..take).collect()
            };
            // A caller that stopped waiting answered 503 already: its request
            // is not sent (nothing is held that nobody was told of).
            let (batch, left): (Vec<_>, Vec<_>) =
                batch.into_iter().partition(|p| !p.reply.is_closed());
            if !left.is_empty() {
                metrics::counter!("stockd_lane_requests_abandoned_total")
                    .increment(left.len() as u64);
            }
            if batch.is_empty() {
                continue;
            }
            metrics::histogram!(C::BATCH_SIZE_METRIC).record(batch.len() as f64);
            let asks: Vec<&C::Ask> = batch.iter().map(|p| &p.ask).collect();
            match self.inner.call_once(&self.key, &asks).await {
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
}

impl<C: BatchCall> Drop for DriverSlot<C> {
    /// Uncounts the driver; the last one to go drops the lane, failing what
    /// is still queued (a driver dropped mid-way, with its runtime: nobody
    /// else would send those requests).
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let mut lanes = self.inner.lanes.lock().unwrap_or_else(|e| e.into_inner());
        let Some(lane) = lanes.get_mut(&self.key) else {
            return;
        };
        lane.drivers = lane.drivers.saturating_sub(1);
        if lane.drivers > 0 {
            return;
        }
        let Some(lane) = lanes.remove(&self.key) else {
            return;
        };
        for pending in lane.queue {
            let stopped = RedisError::Pool("the lane's driver stopped; retry".into());
            let _ = pending.reply.send(Err(stopped));
        }
    }
}

impl<C: BatchCall> Inner<C> {
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
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::Semaphore;

    use super::*;

    /// A script that records what it is sent and answers only when a permit
    /// is given: the test decides when each call ends.
    struct Held {
        sent: Mutex<Vec<u32>>,
        permits: Arc<Semaphore>,
    }

    impl BatchCall for Held {
        type Key = u8;
        type Ask = u32;
        const BATCH_SIZE_METRIC: &'static str = "test_lane_batch_size";

        async fn call(&self, _key: &u8, asks: &[&u32]) -> Result<Vec<Vec<String>>, RedisError> {
            self.sent.lock().unwrap().extend(asks.iter().copied());
            self.permits.acquire().await.unwrap().forget();
            Ok(asks.iter().map(|a| vec![a.to_string()]).collect())
        }
    }

    fn lanes(queue_max: usize) -> (Lanes<Held>, Arc<Semaphore>) {
        let permits = Arc::new(Semaphore::new(0));
        let script = Held {
            sent: Mutex::new(Vec::new()),
            permits: permits.clone(),
        };
        let batching = Batching {
            max: 4,
            in_flight: 1,
            linger: Duration::ZERO,
            queue_max,
        };
        (Lanes::new(script, batching), permits)
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    /// Past `queue_max` queued, a request is refused at once; the queued
    /// ones are still answered.
    #[tokio::test]
    async fn a_full_lane_refuses_at_once_and_answers_what_it_queued() {
        let (lanes, permits) = lanes(2);
        let first = tokio::spawn({
            let lanes = lanes.clone();
            async move { lanes.submit(1, 1).await }
        });
        settle().await;
        let queued: Vec<_> = (2..=3)
            .map(|n| {
                let lanes = lanes.clone();
                tokio::spawn(async move { lanes.submit(1, n).await })
            })
            .collect();
        settle().await;
        let refused = tokio::time::timeout(Duration::from_secs(1), lanes.submit(1, 4)).await;
        assert!(
            matches!(refused, Ok(Err(RedisError::Pool(_)))),
            "refused at once: {refused:?}"
        );
        permits.add_permits(2);
        assert_eq!(first.await.unwrap().unwrap(), vec!["1".to_string()]);
        for (n, task) in (2..=3).zip(queued) {
            assert_eq!(task.await.unwrap().unwrap(), vec![n.to_string()]);
        }
    }

    /// A queued request whose caller stopped waiting is not sent.
    #[tokio::test]
    async fn a_request_whose_caller_left_is_never_sent() {
        let (lanes, permits) = lanes(16);
        let first = tokio::spawn({
            let lanes = lanes.clone();
            async move { lanes.submit(1, 1).await }
        });
        settle().await;
        let gave_up = tokio::time::timeout(Duration::from_millis(10), lanes.submit(1, 2)).await;
        assert!(gave_up.is_err(), "its caller's bound passed");
        let kept = tokio::spawn({
            let lanes = lanes.clone();
            async move { lanes.submit(1, 3).await }
        });
        settle().await;
        permits.add_permits(2);
        first.await.unwrap().unwrap();
        assert_eq!(kept.await.unwrap().unwrap(), vec!["3".to_string()]);
        assert_eq!(*lanes.script().sent.lock().unwrap(), vec![1, 3]);
    }

    /// A driver dropped with its runtime (a worker stopping first) is
    /// uncounted: what it left queued is failed, and the lane serves the
    /// next request with a driver of its own.
    #[test]
    fn a_driver_dropped_with_its_runtime_does_not_block_the_lane() {
        let (lanes, permits) = lanes(16);
        let worker = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let main = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let in_flight = {
            let lanes = lanes.clone();
            worker.spawn(async move { lanes.submit(1, 1).await })
        };
        worker.block_on(settle());
        let queued = {
            let lanes = lanes.clone();
            main.spawn(async move { lanes.submit(1, 2).await })
        };
        main.block_on(settle());
        drop(worker);
        drop(in_flight);
        let answer =
            main.block_on(async { tokio::time::timeout(Duration::from_secs(5), queued).await });
        let answer = answer.expect("the queued request is answered").unwrap();
        assert!(matches!(answer, Err(RedisError::Pool(_))), "{answer:?}");
        permits.add_permits(1);
        let next = main.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), lanes.submit(1, 3)).await
        });
        assert_eq!(next.expect("answered").unwrap(), vec!["3".to_string()]);
    }

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
