//! `stockd --role consumer`: stage 3. Applies deduction messages to MySQL in
//! batches — one transaction per batch, acks only after the commit and after
//! the batch's `persisted` / `rejected` events were confirmed by the broker
//! (events module doc): a batch committed but not told is nacked back, and
//! its redelivery, all duplicates, tells them again under the same ids.
//!
//! Failure handling, by cause (contract §3: a dependency outage is not an attempt):
//! - MySQL down, read-only, out of connections or too slow (any error that is
//!   not about the data): the circuit breaker opens. The deliveries in hand stay
//!   unacked — no attempt used, nothing dead-lettered, and with the prefetch
//!   full the broker sends nothing more — while MySQL is probed; when it
//!   answers, the same batch is applied again (duplicates are skipped).
//! - deadlock / lock wait timeout: the batch transaction is retried in-process;
//! - a batch that fails on its data: its deductions are applied one by one, so
//!   one bad deduction cannot hold back the others; one that still fails on its
//!   data goes to the retry queue with its attempt count, and is dead-lettered
//!   by the consumer itself once `amqp.max_retries` is used up;
//! - a poison message (not a valid deduction): dead-lettered at once.
//!
//! The consumer dead-letters by publishing to the DLQ with header
//! `x-stockd-reason` (and `x-stockd-attempt`), then acking: the reason travels
//! with the message. The broker's `x-delivery-limit` is only a last resort for
//! a message that crashes the process again and again; a crash returns every
//! delivery held, so the limit is sized far above any crash loop (config).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::db::ledger::{self, BatchReport, LedgerRow};
use crate::db::{Db, DbError};
use crate::domain::Deduction;
use crate::events::{cloud, Event};
use crate::health::Breaker;
use crate::mq::batching::{next_batch, Batch, Subscription};
use crate::mq::{message, republish, Delivery, MqError, Publisher, Settler};
use crate::otel::Tracing;
use crate::redis::{ReadmitOutcome, RedisStore};
use crate::roles::traces::BatchTrace;

/// Pause before reconnecting after the broker connection was lost.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);
/// Name of this worker in breaker logs.
const WORKER: &str = "consumer";

pub struct Consumer {
    settings: Arc<Settings>,
    db: Db,
    redis: Arc<RedisStore>,
    publisher: Arc<Publisher>,
    breaker: Arc<Breaker>,
    /// Deliveries taken off the broker's stream and not yet settled (the
    /// broker counts them as unacked, not ready). Tests read it to know the
    /// pipeline drained.
    in_hand: Arc<AtomicUsize>,
    /// Spans of batches and of each traced deduction's commit (`traces`).
    tracing: Tracing,
}

/// What applying a set of deductions came to.
pub enum Applied {
    Committed(BatchReport),
    /// Shutdown came while MySQL was down: the deliveries go back unacked.
    Cancelled,
    /// MySQL refused the data itself (not a dependency failure).
    DataError(DbError),
}

impl Consumer {
    pub fn new(
        settings: Arc<Settings>,
        db: Db,
        redis: Arc<RedisStore>,
        publisher: Arc<Publisher>,
    ) -> Self {
        Self {
            settings,
            db,
            redis,
            publisher,
            breaker: Arc::new(Breaker::new("mysql")),
            in_hand: Arc::new(AtomicUsize::new(0)),
            tracing: Tracing::off(),
        }
    }

    /// The count of deliveries in hand (received, not yet acked or nacked).
    pub fn in_hand(&self) -> Arc<AtomicUsize> {
        self.in_hand.clone()
    }

    /// Built from the shared resources, like every role: the process's pools,
    /// publisher and MySQL breaker (shown by `/readyz`).
    pub fn from_resources(res: &crate::resources::Resources) -> Self {
        Self::new(
            res.settings.clone(),
            res.db.clone(),
            res.redis.clone(),
            res.publisher.clone(),
        )
        .with_breaker(res.mysql_breaker.clone())
        .with_tracing(res.tracing.clone())
    }

    /// Records batch spans with this tracer (the process's, `telemetry.otlp`).
    pub fn with_tracing(mut self, tracing: Tracing) -> Self {
        self.tracing = tracing;
        self
    }

    /// Shares a breaker (the process's MySQL breaker, shown by `/readyz`).
    pub fn with_breaker(mut self, breaker: Arc<Breaker>) -> Self {
        self.breaker = breaker;
        self
    }

    /// Consumes until cancelled; reconnects after broker failures.
    pub async fn run_until_stopped(self, cancel: CancellationToken) {
        while !cancel.is_cancelled() {
            if let Err(err) = self.consume(&cancel).await {
                tracing::error!(error = %err, "consumer: broker connection lost; reconnecting");
                crate::shutdown::sleep_or_cancel(RECONNECT_DELAY, &cancel).await;
            }
        }
        tracing::info!("consumer: stopped");
    }

    async fn consume(&self, cancel: &CancellationToken) -> Result<(), MqError> {
        let topology = self.publisher.topology().clone();
        let settings = &self.settings;
        let queue = topology.deduct_queue.clone();
        let prefetch = settings.consumer.prefetch;
        let mut sub = Subscription::open(
            &settings.amqp,
            &topology,
            &queue,
            prefetch,
            "stockd-consumer",
        )
        .await?;
        let wait = Duration::from_millis(self.settings.consumer.batch_wait_ms);
        let settler = sub.settler();
        // Counted the moment a delivery leaves the stream, so a batch still
        // being collected (up to `batch_wait_ms`) is in hand too.
        let in_hand = self.in_hand.clone();
        let mut stream = (&mut sub.consumer).inspect(move |taken| {
            if taken.is_ok() {
                in_hand.fetch_add(1, Ordering::SeqCst);
            }
        });
        loop {
            let batch = next_batch(&mut stream, self.settings.consumer.batch_max, wait, cancel);
            match batch.await? {
                Batch::Deliveries(deliveries) => {
                    let held = deliveries.len();
                    let processed = self.process(&settler, deliveries, cancel).await;
                    // Settled, or (on an error) back to the broker with the channel.
                    self.in_hand.fetch_sub(held, Ordering::SeqCst);
                    processed?
                }
                Batch::Cancelled => break,
                Batch::Closed => return Err(MqError::ConsumerClosed),
            }
        }
        drop(stream);
        // Unacked prefetched deliveries go back to the queue when the channel closes.
        sub.close().await;
        Ok(())
    }

    /// One step: apply one batch of deliveries (each carrying one or more
    /// deductions) in one transaction, and settle every delivery. While MySQL
    /// is down it holds the deliveries until MySQL answers or `cancel` fires.
    pub async fn process(
        &self,
        settler: &Settler,
        deliveries: Vec<Delivery>,
        cancel: &CancellationToken,
    ) -> Result<(), MqError> {
        let mut probes = Vec::new();
        let mut deductions = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            match delivery.probe_id() {
                // Acked before the batch's multiple ack could cover it.
                Some(id) => {
                    delivery.ack().await?;
                    probes.push(id);
                }
                None => deductions.push(delivery),
            }
        }
        self.process_deductions(settler, deductions, cancel).await?;
        // Shutdown may have left the batch unapplied (back to the queue): its
        // probes do not pass, and their warm-ups are refused.
        if !cancel.is_cancelled() {
            self.pass_probes(&probes).await;
        }
        Ok(())
    }

    /// Marks the warm-up probes of a settled batch as come through
    /// (`mq/probe.rs`). A mark Redis refused leaves that warm-up refused
    /// when its wait runs out; it sends a new probe when retried.
    async fn pass_probes(&self, probes: &[String]) {
        for id in probes {
            match self.redis.probes().pass(id).await {
                Ok(()) => {
                    tracing::info!(probe = %id, "consumer.probe: a warm-up probe came through")
                }
                Err(err) => crate::health::outage::failed("redis", &err),
            }
        }
    }

    /// [`Self::process`] for the deliveries that carry deductions.
    async fn process_deductions(
        &self,
        settler: &Settler,
        deliveries: Vec<Delivery>,
        cancel: &CancellationToken,
    ) -> Result<(), MqError> {
        let mut valid = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            // A newer release's message is never applied (mq/format.rs).
            if let Err(reason) = delivery.format_check() {
                self.dead_letter(delivery, &reason).await?;
                continue;
            }
            match message::decode(delivery.data()) {
                Ok(msgs) => valid.push((delivery, msgs)),
                Err(why) => {
                    let reason = format!("poison: {why}");
                    self.dead_letter(delivery, &reason).await?;
                }
            }
        }
        let Some(last_tag) = valid.last().map(|(d, _)| d.tag()) else {
            return Ok(());
        };
        let msgs: Vec<Deduction> = valid.iter().flat_map(|(_, m)| m.iter().cloned()).collect();
        let queue = &self.publisher.topology().deduct_queue;
        let carried = valid.iter().map(|(d, m)| (d, m.len()));
        let trace = BatchTrace::begin(&self.tracing, queue, carried, msgs.len());
        match self.apply_once(&msgs, cancel).await {
            Applied::Committed(report) => {
                trace.end(&msgs, Some(&report), "committed");
                if self.tell(&report).await {
                    settler.ack_through(last_tag).await?;
                } else {
                    // Committed, not told: back to the queue, so the
                    // redelivery (all duplicates) tells the events again.
                    settler.requeue_through(last_tag).await?;
                }
                self.after_commit(&msgs, &report).await;
            }
            Applied::Cancelled => trace.end(&msgs, None, "cancelled"),
            Applied::DataError(err) => {
                trace.end(&msgs, None, "refused");
                tracing::warn!(error = %err, batch.size = msgs.len(), "consumer.batch: refused by MySQL; applying one by one");
                for (delivery, msgs) in valid {
                    if !self.process_alone(delivery, msgs, cancel).await? {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// One step on deductions (what a batch of deliveries carries): applies
    /// `msgs` in one transaction; while MySQL is unavailable, waits behind the
    /// breaker and tries again. Settling the deliveries is the caller's.
    pub async fn apply_once(&self, msgs: &[Deduction], cancel: &CancellationToken) -> Applied {
        let retries = self.settings.consumer.deadlock_retries;
        loop {
            match ledger::apply_batch(&self.db, msgs, retries).await {
                Ok(report) => {
                    self.breaker.reset(WORKER);
                    return Applied::Committed(report);
                }
                Err(err) if err.is_caused_by_data() => return Applied::DataError(err),
                Err(err) => {
                    self.breaker.trip(WORKER, &err);
                    let db = &self.db;
                    if !self.breaker.wait_until_healthy(cancel, || db.ping()).await {
                        return Applied::Cancelled;
                    }
                }
            }
        }
    }

    /// Applies the deductions of one delivery one by one; each that fails on
    /// its data is parked in the retry queue (or the DLQ once its attempts are
    /// used up). Returns false when shutdown interrupted it.
    async fn process_alone(
        &self,
        delivery: Delivery,
        msgs: Vec<Deduction>,
        cancel: &CancellationToken,
    ) -> Result<bool, MqError> {
        let attempt = delivery.attempt() + 1;
        let mut parked_all = true;
        for msg in msgs {
            match self.apply_once(std::slice::from_ref(&msg), cancel).await {
                Applied::Committed(report) => {
                    // Not told: the whole delivery comes back (requeue below).
                    parked_all &= self.tell(&report).await;
                    self.after_commit(std::slice::from_ref(&msg), &report).await
                }
                // Unacked: the whole delivery comes back after the restart.
                Applied::Cancelled => return Ok(false),
                Applied::DataError(err) => parked_all &= self.park(&msg, attempt, &err).await,
            }
        }
        if parked_all {
            delivery.ack().await?;
        } else {
            // Could not park a failed deduction: the broker redelivers the whole
            // message (applied ones are skipped).
            delivery.requeue().await?;
        }
        Ok(true)
    }

    /// Republishes one deduction MySQL refused to the retry queue, or to the DLQ
    /// (with the reason) once `amqp.max_retries` is used up. Returns whether
    /// the broker took it.
    async fn park(&self, msg: &Deduction, attempt: u32, err: &DbError) -> bool {
        let topology = self.publisher.topology();
        let (exchange, key, outcome) = if attempt > self.settings.amqp.max_retries {
            (
                topology.dead_letter_exchange.as_str(),
                topology.deduct_dlq.as_str(),
                "dead_lettered",
            )
        } else {
            ("", topology.deduct_retry_queue.as_str(), "retried")
        };
        tracing::error!(error = %err, sku.id = %msg.sku_id, request.id = %msg.request_id, attempt, outcome, "consumer.message: refused by MySQL");
        let reason = format!("mysql refused after {attempt} attempts: {err}");
        let props = republish::parked(msg, attempt, &reason);
        let parked = self
            .publisher
            .publish(exchange, key, &message::to_bytes(msg), props)
            .await
            .is_ok();
        if parked {
            metrics::counter!("stockd_consumer_messages_total", "outcome" => outcome).increment(1);
        }
        parked
    }

    /// Dead-letters a delivery the consumer judged poison, with the reason in
    /// its headers; falls back to a reject (the broker's own dead-lettering)
    /// when the DLQ does not confirm.
    async fn dead_letter(&self, delivery: Delivery, reason: &str) -> Result<(), MqError> {
        tracing::error!(
            reason,
            "consumer.poison: dead-lettering a message it cannot apply"
        );
        metrics::counter!("stockd_consumer_messages_total", "outcome" => "dead_lettered")
            .increment(1);
        let topology = self.publisher.topology();
        // The format travels on, so a replay is read as what it is.
        let props = delivery.dead_letter_properties(reason);
        let published = self
            .publisher
            .publish(
                &topology.dead_letter_exchange,
                &topology.deduct_dlq,
                delivery.data(),
                props,
            )
            .await;
        if published.is_ok() {
            delivery.ack().await?;
        } else {
            delivery.reject().await?;
        }
        Ok(())
    }

    /// Publishes the batch's reservation events (`persisted`, `rejected`,
    /// and again those of duplicates) with confirms, before the ack: the
    /// ledger's idempotency is the outbox of these events (`BatchReport::told`).
    /// False when the broker did not confirm them.
    async fn tell(&self, report: &BatchReport) -> bool {
        if report.told.is_empty() {
            return true;
        }
        let source = self.db.events().source();
        let with_ids: Vec<(String, &Event)> =
            (report.told.iter()).map(|e| (e.id.clone(), e)).collect();
        for message in cloud::messages(&with_ids, source) {
            if let Err(err) = self.publisher.publish_events(&message).await {
                tracing::warn!(error = %err, events = message.events,
                    "consumer.events: not confirmed; the deliveries go back and are told again");
                return false;
            }
            metrics::counter!("stockd_events_published_total", "type" => message.routing_key)
                .increment(message.events as u64);
        }
        true
    }

    async fn after_commit(&self, msgs: &[Deduction], report: &BatchReport) {
        metrics::counter!("stockd_consumer_batches_total").increment(1);
        metrics::histogram!("stockd_consumer_batch_size").record(msgs.len() as f64);
        metrics::counter!("stockd_consumer_messages_total", "outcome" => "applied")
            .increment(report.applied as u64);
        metrics::counter!("stockd_consumer_messages_total", "outcome" => "duplicate")
            .increment(report.duplicates as u64);
        metrics::counter!("stockd_consumer_messages_total", "outcome" => "rejected")
            .increment(report.rejected.len() as u64);
        let now_ms = crate::clock::unix_ms();
        for msg in msgs {
            let lag_ms = now_ms.saturating_sub(msg.created_ms);
            metrics::histogram!("stockd_persist_lag_seconds").record(lag_ms as f64 / 1000.0);
        }
        for (msg, why) in &report.rejected {
            tracing::error!(sku.id = %msg.sku_id, request.id = %msg.request_id, user.id = %msg.user_id,
                count = msg.count, reason = why,
                "consumer.rejected: MySQL could not apply a reservation Redis admitted");
            // On failure the row stays `redis_pending`: the closer's sweep retries.
            let row = LedgerRow::rejected(msg, why);
            crate::ops::lifecycle::mirror(&self.db, &self.redis, &row).await;
        }
        self.mark_rejected_orders(report).await;
        for readmission in &report.readmitted {
            self.settle_readmission(readmission).await;
        }
        for (msg, owner) in &report.foreign {
            match self
                .redis
                .reservations()
                .reject_foreign_duplicate(msg, *owner)
                .await
            {
                Ok(true) => {
                    tracing::warn!(sku.id = %msg.sku_id, request.id = %msg.request_id, user.id = %msg.user_id,
                        owner = %owner, "consumer.foreign_duplicate: request id already used by another buyer; rejected in Redis, unit returned");
                    metrics::counter!("stockd_consumer_messages_total", "outcome" => "foreign_duplicate")
                        .increment(1);
                }
                Ok(false) => {}
                Err(err) => crate::health::outage::failed("redis", &err),
            }
        }
    }

    /// A rejected order's Redis record says so too, so a replay of the
    /// order answers `REJECTED` (its lines were mirrored one by one above).
    async fn mark_rejected_orders(&self, report: &BatchReport) {
        let mut orders = std::collections::BTreeSet::new();
        for (msg, _) in &report.rejected {
            if msg.order.is_some() {
                orders.insert(&msg.request_id);
            }
        }
        for order_id in orders {
            metrics::counter!("stockd_orders_total", "result" => "rejected").increment(1);
            let marked = self
                .redis
                .orders()
                .mark(order_id, crate::domain::ReservationStatus::Rejected)
                .await;
            if let Err(err) = marked {
                crate::health::outage::failed("redis", &err);
            }
        }
    }

    /// A duplicate Redis admitted a second time after losing its record.
    async fn settle_readmission(&self, r: &ledger::Readmission) {
        match self.redis.reservations().settle_readmission(r).await {
            Ok(outcome) => {
                if outcome != ReadmitOutcome::Noop {
                    tracing::warn!(sku.id = %r.msg.sku_id, request.id = %r.msg.request_id,
                        outcome = ?outcome,
                        "consumer.readmitted: Redis admitted a request id twice (it lost the first record); settled");
                }
                metrics::counter!("stockd_consumer_readmissions_total", "outcome" => format!("{outcome:?}").to_lowercase())
                    .increment(1);
            }
            Err(err) => crate::health::outage::failed("redis", &err),
        }
    }
}
