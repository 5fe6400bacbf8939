//! Pub/Sub connections for the sold-out board (`soldout/`): dedicated,
//! non-pooled connections built from the same URLs and TLS as the commands.
//! Kept apart from the command connection because a subscribed connection
//! can run nothing else.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use deadpool_redis::redis;

use super::RedisError;

pub struct Subscriptions {
    /// One client per node URL, tried in turn on every (re)subscribe.
    clients: Vec<redis::Client>,
    /// Which of `clients` the next subscribe tries first.
    next: AtomicUsize,
    /// `redis.connect_timeout_ms`: how long one node may take to connect.
    connect_timeout: Duration,
}

impl Subscriptions {
    pub(super) fn new(clients: Vec<redis::Client>, connect_timeout: Duration) -> Self {
        Self {
            clients,
            next: AtomicUsize::new(0),
            connect_timeout,
        }
    }

    /// A dedicated (non-pooled) Pub/Sub connection. On a cluster every node
    /// hears every `PUBLISH`, so any node will do: each call starts at the
    /// next node URL and tries them all, so a dead node is skipped.
    pub async fn connect(&self) -> Result<redis::aio::PubSub, RedisError> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut last = RedisError::Pool("no redis node URL".into());
        for i in 0..self.clients.len() {
            let client = &self.clients[(start + i) % self.clients.len()];
            match tokio::time::timeout(self.connect_timeout, client.get_async_pubsub()).await {
                Ok(Ok(pubsub)) => return Ok(pubsub),
                Ok(Err(err)) => last = err.into(),
                Err(_) => last = RedisError::Pool("pubsub connect timed out".into()),
            }
        }
        Err(last)
    }
}
