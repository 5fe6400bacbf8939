//! The one connection every aggregate of the adapter shares: the hot
//! connection, the key builder and the one bounded `run` every call goes
//! through. Held behind one `Arc` by each aggregate (`Reservations`, `Skus`,
//! `Buckets`, ...), so they all use one socket (or one cluster client), one
//! deadline and one failure check.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use deadpool_redis::redis;

use super::link::RedisLink;
use super::{HotConnection, Keys, RedisError};

tokio::task_local! {
    /// Calls made under [`counting`] in this task.
    static CALLS: Cell<u64>;
}

/// Runs `work` and counts the Redis calls it makes in this task (each one
/// [`Core::bounded`] call: a command, a script, a pipeline), not those of
/// other tasks sharing the connection: what a test measures of one
/// operation (an order's refusal, `tests/it/orders_intents.rs`).
pub async fn counting<T>(work: impl Future<Output = T>) -> (T, u64) {
    CALLS
        .scope(Cell::new(0), async {
            let out = work.await;
            (out, CALLS.with(Cell::get))
        })
        .await
}

pub struct Core {
    pub(super) hot: HotConnection,
    pub(super) keys: Keys,
    /// Longest one call may take: `connect_timeout_ms + command_timeout_ms`.
    call_bound: Duration,
}

impl Core {
    pub(super) fn new(hot: HotConnection, keys: Keys, call_bound: Duration) -> Self {
        Self {
            hot,
            keys,
            call_bound,
        }
    }

    /// Takes a connection and runs `op` on it, within [`Self::bounded`].
    pub(super) async fn run<T, F, Fut>(&self, op: F) -> Result<T, RedisError>
    where
        F: FnOnce(RedisLink) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        self.bounded(async {
            let conn = self.hot.get().await?;
            op(conn).await.map_err(RedisError::from)
        })
        .await
    }

    /// Every call's one deadline and failure check. The deadline covers
    /// taking (or building) a connection and the command: without it a frozen
    /// Redis costs the pool wait, the connect and the response timeouts one
    /// after the other. A failure is shown to the connection, which drops a
    /// broken standalone socket.
    pub(super) async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, RedisError>>,
    ) -> Result<T, RedisError> {
        let _ = CALLS.try_with(|calls| calls.set(calls.get() + 1));
        let result = match tokio::time::timeout(self.call_bound, call).await {
            Ok(result) => result,
            Err(_) => Err(RedisError::Timeout),
        };
        if let Err(err) = &result {
            self.hot.observe(err);
        }
        result
    }

    /// Redis' clock in milliseconds (any node; use [`Self::now_ms_at`] to
    /// compare with times a script wrote).
    pub(super) async fn now_ms(&self) -> Result<u64, RedisError> {
        let (secs, micros): (u64, u64) = self
            .run(|mut c| async move { redis::cmd("TIME").query_async(&mut c).await })
            .await?;
        Ok(secs * 1000 + micros / 1000)
    }

    /// The clock of the node that owns `key`: the one its scripts read, so
    /// stream ids and `created_ms` compare without inter-node skew.
    pub(super) async fn now_ms_at(&self, key: &str) -> Result<u64, RedisError> {
        let value = self
            .bounded(self.hot.on_owner_of(key, redis::cmd("TIME")))
            .await?;
        let (secs, micros): (u64, u64) =
            redis::from_redis_value(value).map_err(|e| RedisError::BadReply(e.to_string()))?;
        Ok(secs * 1000 + micros / 1000)
    }
}
