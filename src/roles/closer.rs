//! `stockd --role closer`: ends unpaid reservations (SPEC §3 delay message, §5).
//!
//! Two paths, so a lost message never keeps stock locked:
//! - primary: every reservation's message also went into the delay queue; after
//!   `reservation.ttl_secs` it is dead-lettered into the expiry queue, and the
//!   closer releases the reservation if it is still `RESERVED`;
//! - backstop: a sweep finds `RESERVED` rows past expiry + grace in bounded
//!   batches (`FOR UPDATE SKIP LOCKED`, so several closers split the work) and
//!   releases them; the same sweep retries Redis mirrors still pending.
//!
//! While MySQL (or Redis, for a reservation the consumer has not applied yet)
//! is down, an expiry delivery is held unacked behind the circuit breaker and
//! retried when the dependency answers — never requeued, which would count a
//! delivery and could dead-letter a routine expiry.

use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicAckOptions, BasicNackOptions};
use tokio_util::sync::CancellationToken;

use crate::clock::unix_ms;
use crate::db::{ledger, settle, DbError};
use crate::domain::Deduction;
use crate::domain::SkuId;
use crate::mq::batching::{next_batch, Batch, Subscription};
use crate::mq::{message, MqError};
use crate::ops::lifecycle::{self, LifecycleError, Transition, TransitionOutcome};
use crate::resources::Resources;

/// Pause before reconnecting to the broker or retrying a failed expiry batch.
const RETRY_DELAY: Duration = Duration::from_secs(1);
/// SKUs examined per sweep pass.
const SWEEP_SKUS_MAX: usize = 100;
/// Name of this worker in breaker logs.
const WORKER: &str = "closer";
/// A pending mirror younger than this is still being handled by its request.
const PENDING_MIRROR_AGE_MS: u64 = 2000;

pub struct Closer {
    res: Resources,
}

impl Closer {
    pub fn new(res: Resources) -> Self {
        Self { res }
    }

    /// Runs the expiry consumer and the sweep until cancelled.
    pub async fn run_until_stopped(self, cancel: CancellationToken) {
        let this = Arc::new(self);
        let sweeper = {
            let this = this.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { this.sweep_until_stopped(cancel).await })
        };
        while !cancel.is_cancelled() {
            if let Err(err) = this.consume_expiries(&cancel).await {
                tracing::error!(error = %err, "closer: broker connection lost; reconnecting");
                crate::shutdown::sleep_or_cancel(RETRY_DELAY, &cancel).await;
            }
        }
        let _ = sweeper.await;
        tracing::info!("closer: stopped");
    }

    async fn consume_expiries(&self, cancel: &CancellationToken) -> Result<(), MqError> {
        let settings = &self.res.settings;
        let topology = self.res.publisher.topology().clone();
        let prefetch = u16::try_from(settings.closer.expiry_batch * 2).unwrap_or(u16::MAX);
        let queue = topology.expiry_queue.clone();
        let mut sub =
            Subscription::open(&settings.amqp, &topology, &queue, prefetch, "stockd-closer")
                .await?;
        let wait = Duration::from_millis(settings.consumer.batch_wait_ms);
        loop {
            match next_batch(
                &mut sub.consumer,
                settings.closer.expiry_batch,
                wait,
                cancel,
            )
            .await?
            {
                Batch::Deliveries(deliveries) => {
                    for delivery in deliveries {
                        if !self.settle_expiry(delivery, cancel).await? {
                            break; // shutdown while a dependency was down
                        }
                    }
                }
                Batch::Cancelled => break,
                Batch::Closed => return Err(MqError::ConsumerClosed),
            }
        }
        sub.close().await;
        Ok(())
    }

    /// Expires every reservation a delivery carries, then acks it. While a
    /// dependency is down the delivery is held (breaker) and retried; returns
    /// false when shutdown came first (the delivery goes back unacked).
    async fn settle_expiry(
        &self,
        delivery: lapin::message::Delivery,
        cancel: &CancellationToken,
    ) -> Result<bool, MqError> {
        let msgs = match message::decode(&delivery.data) {
            Ok(msgs) => msgs,
            Err(why) => {
                tracing::error!(reason = %why, "closer.poison: dead-lettering");
                let reject = BasicNackOptions {
                    requeue: false,
                    multiple: false,
                };
                delivery.acker.nack(reject).await?;
                return Ok(true);
            }
        };
        for msg in &msgs {
            while let Err(err) = self.expire(msg).await {
                let breaker = &self.res.mysql_breaker;
                breaker.trip(WORKER, &err);
                let probe = || async {
                    self.res.db.ping().await.map_err(|e| e.to_string())?;
                    self.res.redis.ping().await.map_err(|e| e.to_string())
                };
                if !breaker.wait_until_healthy(cancel, probe).await {
                    return Ok(false);
                }
            }
        }
        self.res.mysql_breaker.reset(WORKER);
        delivery.acker.ack(BasicAckOptions::default()).await?;
        Ok(true)
    }

    /// Expires one reservation; an error means a dependency is down (retry).
    pub async fn expire(&self, msg: &Deduction) -> Result<(), LifecycleError> {
        let result = lifecycle::transition(
            &self.res.db,
            &self.res.redis,
            msg.sku_id,
            &msg.request_id,
            Transition::Expire,
            unix_ms(),
        )
        .await?;
        if let TransitionOutcome::Done { changed: true, .. } = result {
            metrics::counter!("stockd_closer_releases_total", "reason" => "EXPIRED", "path" => "delay_queue").increment(1);
        }
        Ok(())
    }

    async fn sweep_until_stopped(&self, cancel: CancellationToken) {
        let idle = Duration::from_millis(self.res.settings.closer.sweep_interval_ms);
        while !cancel.is_cancelled() {
            let full = match self.sweep_once().await {
                Ok(n) => n >= self.res.settings.closer.sweep_batch,
                Err(err) => {
                    crate::health::outage::failed("mysql", &err);
                    false
                }
            };
            if !full {
                crate::shutdown::sleep_or_cancel(idle, &cancel).await;
            }
        }
    }

    /// One sweep pass: release expired rows, retry pending mirrors. Returns the
    /// largest batch handled (a full batch means: go again without sleeping).
    pub async fn sweep_once(&self) -> Result<usize, DbError> {
        let settings = &self.res.settings.closer;
        let cutoff = unix_ms().saturating_sub(settings.grace_ms);
        let skus: Vec<u64> = self
            .res
            .db
            .bounded(async {
                let mut conn = self.res.db.conn().await?;
                settle::skus_with_expired(&mut conn, cutoff, SWEEP_SKUS_MAX).await
            })
            .await?;
        let mut largest = 0;
        for raw in skus {
            let Ok(sku_id) = SkuId::new(raw) else {
                continue;
            };
            let released = self
                .res
                .db
                .bounded(lifecycle::release_expired(
                    &self.res.db,
                    sku_id,
                    cutoff,
                    settings.sweep_batch,
                ))
                .await?;
            largest = largest.max(released.len());
            for row in &released {
                lifecycle::mirror(&self.res.db, &self.res.redis, row).await;
            }
            metrics::counter!("stockd_closer_releases_total", "reason" => "EXPIRED", "path" => "sweep")
                .increment(released.len() as u64);
        }
        let retried = self.retry_pending_mirrors(settings.sweep_batch).await?;
        Ok(largest.max(retried))
    }

    async fn retry_pending_mirrors(&self, limit: usize) -> Result<usize, DbError> {
        let older_than = unix_ms().saturating_sub(PENDING_MIRROR_AGE_MS);
        let rows = self
            .res
            .db
            .bounded(async {
                let mut conn = self.res.db.conn().await?;
                ledger::pending_mirrors(&mut conn, older_than, limit).await
            })
            .await?;
        for row in &rows {
            lifecycle::mirror(&self.res.db, &self.res.redis, row).await;
        }
        Ok(rows.len())
    }
}
