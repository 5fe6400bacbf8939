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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::Context;
use tokio_util::sync::CancellationToken;

use crate::clock::unix_ms;
use crate::domain::{Deduction, RequestId, SkuId};
use crate::mq::batching::{next_batch, Batch, Subscription};
use crate::mq::{message, republish, Delivery, MqError};
use crate::ops::lifecycle::{
    self, LifecycleError, OrderHold, OrderTransitionOutcome, Transition, TransitionOutcome,
};
use crate::ops::sweep::{self, Swept};
use crate::otel;
use crate::resources::Resources;
use crate::roles::traces;

/// Pause before reconnecting to the broker or retrying a failed expiry batch.
const RETRY_DELAY: Duration = Duration::from_secs(1);
/// Reservations of one SKU released per batch (one MySQL transaction, one
/// Redis call per bucket): the delivery batch, `closer.expiry_batch`, rarely
/// holds more; the bound keeps one transaction's lock time short.
const EXPIRE_CHUNK: usize = 500;
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
                    if !self.settle_expiries(deliveries, cancel).await? {
                        break; // shutdown while a dependency was down
                    }
                }
                Batch::Cancelled => break,
                Batch::Closed => return Err(MqError::ConsumerClosed),
            }
        }
        sub.close().await;
        Ok(())
    }

    /// Expires every reservation a batch of deliveries carries, then acks
    /// them. While a dependency is down the batch is held (breaker) and
    /// retried whole (a release is idempotent); returns false when shutdown
    /// came first (the deliveries go back unacked).
    async fn settle_expiries(
        &self,
        deliveries: Vec<Delivery>,
        cancel: &CancellationToken,
    ) -> Result<bool, MqError> {
        let mut held = Vec::with_capacity(deliveries.len());
        let mut due: Vec<(Deduction, Context)> = Vec::new();
        for delivery in deliveries {
            let msgs = match message::decode(delivery.data()) {
                Ok(msgs) => msgs,
                Err(why) => {
                    tracing::error!(reason = %why, "closer.poison: dead-lettering");
                    delivery.reject().await?;
                    continue;
                }
            };
            let parents = traces::contexts_of(&delivery, msgs.len());
            let parents = parents.into_iter().map(Option::unwrap_or_default);
            due.extend(msgs.into_iter().zip(parents));
            held.push(delivery);
        }
        while let Err(err) = self.expire_all(&due).await {
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
        self.res.mysql_breaker.reset(WORKER);
        for delivery in held {
            delivery.ack().await?;
        }
        Ok(true)
    }

    /// Expires one reservation; an error means a dependency is down (retry).
    pub async fn expire(&self, msg: &Deduction) -> Result<(), LifecycleError> {
        self.expire_many(std::slice::from_ref(msg)).await
    }

    /// Expires the reservations `msgs` name as the delay queue hands them
    /// over: each SKU's in batches (`lifecycle::expire_many`), each order
    /// whole and once, whichever of its lines come. An error means a
    /// dependency is down (retry: a release is idempotent).
    pub async fn expire_many(&self, msgs: &[Deduction]) -> Result<(), LifecycleError> {
        let due: Vec<(Deduction, Context)> =
            (msgs.iter()).map(|m| (m.clone(), Context::new())).collect();
        self.expire_all(&due).await
    }

    /// [`Self::expire_many`], each reservation a span under its parent (the
    /// reservation's trace, which the expiry message carries from its request).
    async fn expire_all(&self, due: &[(Deduction, Context)]) -> Result<(), LifecycleError> {
        let mut orders_seen = std::collections::HashSet::new();
        let mut by_sku: BTreeMap<SkuId, Vec<&(Deduction, Context)>> = BTreeMap::new();
        for item in due {
            let msg = &item.0;
            if msg.order.is_none() {
                by_sku.entry(msg.sku_id).or_default().push(item);
            } else if orders_seen.insert(msg.request_id.clone()) {
                self.expire_order(msg).await?;
            }
        }
        for (sku_id, items) in by_sku {
            for chunk in items.chunks(EXPIRE_CHUNK) {
                self.expire_chunk(sku_id, chunk).await?;
            }
        }
        Ok(())
    }

    /// One SKU's expiries in one batch, each with its span.
    async fn expire_chunk(
        &self,
        sku_id: SkuId,
        items: &[&(Deduction, Context)],
    ) -> Result<(), LifecycleError> {
        let tracing = &self.res.tracing;
        let spans: Vec<Option<Context>> = (items.iter())
            .map(|(msg, parent)| {
                traces::transition_span(
                    tracing,
                    parent,
                    Transition::Expire,
                    sku_id,
                    &msg.request_id,
                )
            })
            .collect();
        let ids: Vec<RequestId> = items.iter().map(|(m, _)| m.request_id.clone()).collect();
        let (db, redis) = (&self.res.db, &self.res.redis);
        let result = lifecycle::expire_many(db, redis, sku_id, &ids, unix_ms()).await;
        let outcomes = match result {
            Ok(outcomes) => outcomes,
            Err(err) => {
                spans
                    .into_iter()
                    .for_each(|span| otel::end(span, "error", true));
                return Err(err);
            }
        };
        let mut released = 0;
        for ((item, span), outcome) in items.iter().zip(spans).zip(outcomes) {
            otel::end(span, traces::transition_outcome(&outcome), false);
            match outcome {
                TransitionOutcome::Done { changed: true, .. } => released += 1,
                TransitionOutcome::NotYetExpired => self.wait_again(&item.0).await,
                _ => {}
            }
        }
        metrics::counter!("stockd_closer_releases_total", "reason" => "EXPIRED", "path" => "delay_queue").increment(released);
        metrics::histogram!("stockd_closer_release_batch_size").record(items.len() as f64);
        Ok(())
    }

    /// Expires the whole order one of whose lines `msg` is.
    async fn expire_order(&self, msg: &Deduction) -> Result<(), LifecycleError> {
        let outcome = lifecycle::transition(
            &self.res.db,
            &self.res.redis,
            &OrderHold {
                order_id: &msg.request_id,
            },
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
        let props = republish::expiry_again(msg);
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
