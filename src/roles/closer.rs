//! `stockd --role closer`: ends unpaid reservations (contract §3 delay message, §5).
//!
//! Two paths, so a lost message never keeps stock locked:
//! - primary: every reservation's message also went into the delay queue; after
//!   `reservation.ttl_secs` it is dead-lettered into the expiry queue, and the
//!   closer releases the reservation if it is still `RESERVED`;
//! - backstop: a sweep finds `RESERVED` rows past expiry + grace in bounded
//!   batches (`FOR UPDATE SKIP LOCKED`, so several closers split the work) and
//!   releases them; the same sweep retries Redis mirrors still pending.
//!
//! This file is the loop and the settlement of deliveries; the release itself
//! is `ops::lifecycle` (a delivery) and `ops::sweep` (one bounded pass). Each
//! expiry is a span in its reservation's trace (`roles::traces`).
//!
//! While MySQL (or Redis, for a reservation the consumer has not applied yet)
//! is down, an expiry delivery is held unacked behind the circuit breaker and
//! retried when the dependency answers — never requeued, which would count a
//! delivery and could dead-letter a routine expiry.

use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicAckOptions, BasicNackOptions};
use opentelemetry::Context;
use tokio_util::sync::CancellationToken;

use crate::clock::unix_ms;
use crate::domain::Deduction;
use crate::mq::batching::{next_batch, Batch, Subscription};
use crate::mq::{message, MqError};
use crate::ops::lifecycle::{
    self, LifecycleError, OrderTransitionOutcome, Transition, TransitionOutcome,
};
use crate::ops::sweep::{self, Swept};
use crate::otel;
use crate::resources::Resources;
use crate::roles::traces;

/// Pause before reconnecting to the broker or retrying a failed expiry batch.
const RETRY_DELAY: Duration = Duration::from_secs(1);
/// Name of this worker in breaker logs.
const WORKER: &str = "closer";

pub struct Closer {
    /// The process's pools, settings and MySQL breaker (shown by `/readyz`).
    res: Resources,
}

impl Closer {
    /// Built from the shared resources, like every role.
    pub fn from_resources(res: &Resources) -> Self {
        Self { res: res.clone() }
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
        let parents = traces::contexts_of(&delivery, msgs.len());
        // An order expires whole, once, whichever of its lines come.
        let mut orders_seen = std::collections::HashSet::new();
        for (msg, parent) in msgs.iter().zip(parents) {
            if msg.order.is_some() && !orders_seen.insert(msg.request_id.clone()) {
                continue;
            }
            let parent = parent.unwrap_or_default();
            while let Err(err) = self.expire_under(msg, &parent).await {
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
        self.expire_under(msg, &Context::new()).await
    }

    /// [`Self::expire`] as a span under `parent` (the reservation's trace,
    /// which the expiry message carries from its request).
    async fn expire_under(&self, msg: &Deduction, parent: &Context) -> Result<(), LifecycleError> {
        if msg.order.is_some() {
            return self.expire_order(msg).await;
        }
        let tracing = &self.res.tracing;
        let span = traces::transition_span(
            tracing,
            parent,
            Transition::Expire,
            msg.sku_id,
            &msg.request_id,
        );
        let result = lifecycle::transition(
            &self.res.db,
            &self.res.redis,
            msg.sku_id,
            &msg.request_id,
            Transition::Expire,
            unix_ms(),
            &crate::domain::Requester::Anyone,
        )
        .await;
        let label = result.as_ref().map_or("error", traces::transition_outcome);
        otel::end(span, label, result.is_err());
        match result? {
            TransitionOutcome::Done { changed: true, .. } => {
                metrics::counter!("stockd_closer_releases_total", "reason" => "EXPIRED", "path" => "delay_queue").increment(1);
            }
            TransitionOutcome::NotYetExpired => self.wait_again(msg).await,
            _ => {}
        }
        Ok(())
    }

    /// Expires the whole order one of whose lines `msg` is.
    async fn expire_order(&self, msg: &Deduction) -> Result<(), LifecycleError> {
        let outcome = lifecycle::transition_order(
            &self.res.db,
            &self.res.redis,
            &msg.request_id,
            Transition::Expire,
            unix_ms(),
            &crate::domain::Requester::Anyone,
        )
        .await?;
        match outcome {
            OrderTransitionOutcome::Done { changed: true, .. } => {
                metrics::counter!("stockd_closer_releases_total", "reason" => "EXPIRED", "path" => "delay_queue").increment(1);
                metrics::counter!("stockd_orders_total", "result" => "expired").increment(1);
            }
            OrderTransitionOutcome::NotYetExpired => self.wait_again(msg).await,
            _ => {}
        }
        Ok(())
    }

    /// An expiry that came before MySQL's time (the reservation was extended):
    /// the message waits once more, in the extension's delay level, which
    /// ends at or after the new time (the message came at or after the old
    /// one, and one extension moves it by at most that level's TTL). A failed
    /// publish is left to the sweep, which releases by MySQL's time too.
    async fn wait_again(&self, msg: &Deduction) {
        let publisher = &self.res.publisher;
        let queue = publisher.topology().expiry_extended_queue.clone();
        let props = lapin::BasicProperties::default()
            .with_message_id(message::message_id(msg).into())
            .with_content_type("application/json".into())
            .with_delivery_mode(crate::mq::publisher::PERSISTENT);
        let body = message::encode(std::slice::from_ref(msg));
        match publisher.publish("", &queue, &body, props).await {
            Ok(()) => {
                metrics::counter!("stockd_closer_expiries_deferred_total").increment(1);
            }
            Err(err) => {
                tracing::warn!(sku.id = %msg.sku_id, request.id = %msg.request_id, error = %err,
                    "closer: an extended reservation's expiry not queued again; the sweep releases it at its time");
            }
        }
    }

    async fn sweep_until_stopped(&self, cancel: CancellationToken) {
        let idle = Duration::from_millis(self.res.settings.closer.sweep_interval_ms);
        while !cancel.is_cancelled() {
            let full = match self.sweep_once().await {
                Ok(swept) => swept.full,
                Err(LifecycleError::Db(err)) => {
                    crate::health::outage::failed("mysql", &err);
                    false
                }
                Err(LifecycleError::Redis(err)) => {
                    crate::health::outage::failed("redis", &err);
                    false
                }
            };
            if !full {
                crate::shutdown::sleep_or_cancel(idle, &cancel).await;
            }
        }
    }

    /// One step of the sweep: one bounded pass ([`sweep::pass`]) over rows
    /// expired more than `closer.grace_ms` ago. `full` in the result means:
    /// go again without sleeping.
    pub async fn sweep_once(&self) -> Result<Swept, LifecycleError> {
        let settings = &self.res.settings.closer;
        let cutoff_ms = unix_ms().saturating_sub(settings.grace_ms);
        let swept = sweep::pass(
            &self.res.db,
            &self.res.redis,
            cutoff_ms,
            settings.sweep_batch,
        )
        .await?;
        metrics::counter!("stockd_closer_releases_total", "reason" => "EXPIRED", "path" => "sweep")
            .increment(swept.released as u64);
        Ok(swept)
    }
}
