//! The relay: RocketMQ's transaction check-back. Outbox entries older than
//! `relay.idle_ms` (by Redis' clock: stream ids are Redis `TIME`) were never
//! confirmed — the api crashed between script and publish, the broker was down,
//! or the confirm timed out — so they are published again. Several api nodes may
//! relay the same entry at once; the consumer's idempotency makes that harmless.
//!
//! A first design named XAUTOCLAIM; stockd's outbox has no consumer group (the api
//! publishes entries straight from the script's reply, never reads them), so
//! "idle" is the entry's age, read with XRANGE up to `now - idle_ms`.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use super::GroupCommit;
use crate::config::RelaySettings;
use crate::redis::keys::ORDER_SHARDS;
use crate::redis::outbox::OutboxStream;
use crate::redis::{RedisError, RedisStore};

pub struct Relay {
    redis: Arc<RedisStore>,
    group: GroupCommit,
    settings: RelaySettings,
}

impl Relay {
    pub fn new(redis: Arc<RedisStore>, group: GroupCommit, settings: RelaySettings) -> Self {
        Self {
            redis,
            group,
            settings,
        }
    }

    /// Runs passes until cancelled. No sleep after a pass that found a full batch.
    pub async fn run_until_stopped(self, cancel: CancellationToken) {
        let idle = Duration::from_millis(self.settings.interval_ms);
        while !cancel.is_cancelled() {
            let full = match self.run_once().await {
                Ok(republished) => republished >= self.settings.batch_size,
                Err(err) => {
                    tracing::warn!(error = %err, "relay.pass: failed");
                    false
                }
            };
            if !full {
                crate::shutdown::sleep_or_cancel(idle, &cancel).await;
            }
        }
    }

    /// One pass over every SKU's outbox and every order shard's; returns how many entries were confirmed.
    pub async fn run_once(&self) -> Result<usize, RedisError> {
        let mut republished = 0;
        let mut backlog: u64 = 0;
        for sku in self.redis.skus().registered_skus().await? {
            let stale = self
                .redis
                .outbox()
                .stale(sku, self.settings.idle_ms, self.settings.batch_size)
                .await?;
            backlog += stale.len() as u64;
            let results = join_all(stale.into_iter().map(|entry| async move {
                let stream = OutboxStream::of_bucket(sku, entry.bucket);
                self.group.republish(stream, entry).await
            }))
            .await;
            republished += results.iter().filter(|r| r.is_ok()).count();
        }
        // Orders held line by line: one entry per order, in its shard's stream.
        for shard in 0..ORDER_SHARDS {
            let stale = self
                .redis
                .outbox()
                .stale_orders(shard, self.settings.idle_ms, self.settings.batch_size)
                .await?;
            backlog += stale.len() as u64;
            let results = join_all(stale.into_iter().map(|entry| async move {
                let stream = OutboxStream::of_order_shard(shard, entry.message.sku_id);
                self.group.republish(stream, entry).await
            }))
            .await;
            republished += results.iter().filter(|r| r.is_ok()).count();
        }
        metrics::gauge!("stockd_outbox_stale_entries").set(backlog as f64);
        metrics::counter!("stockd_relay_republished_total").increment(republished as u64);
        Ok(republished)
    }
}
