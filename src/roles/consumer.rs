//! `stockd --role consumer`: stage 3. Applies deduction messages to MySQL in
//! batches — one transaction per batch, acks only after the commit.
//!
//! Failure handling, from cheapest to last resort:
//! - deadlock / lock wait timeout: the batch transaction is retried in-process;
//! - a batch that still fails: its messages are applied one by one, so one bad
//!   message cannot hold back the others;
//! - a message that fails alone: republished to the retry queue (TTL back to the
//!   work queue) with its attempt count, and to the dead-letter queue once
//!   `amqp.max_retries` is used up;
//! - a poison message (not a valid deduction): rejected without requeue, which
//!   dead-letters it at once.

use std::sync::Arc;
use std::time::Duration;

use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions};
use lapin::BasicProperties;
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::db::ledger::{self, BatchReport};
use crate::db::Db;
use crate::mq::batching::{attempt_of, next_batch, Batch, Subscription};
use crate::mq::publisher::headers_with_attempt;
use crate::mq::{message, DeductionMessage, MqError, Publisher};
use crate::redis::RedisStore;

/// Pause before reconnecting after the broker connection was lost.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

pub struct Consumer {
    settings: Arc<Settings>,
    db: Db,
    redis: Arc<RedisStore>,
    publisher: Arc<Publisher>,
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
        }
    }

    /// Consumes until cancelled; reconnects after broker failures.
    pub async fn run_until_stopped(self, cancel: CancellationToken) {
        while !cancel.is_cancelled() {
            if let Err(err) = self.consume(&cancel).await {
                tracing::error!(error = %err, "consumer: broker connection lost; reconnecting");
                tokio::select! {
                    _ = tokio::time::sleep(RECONNECT_DELAY) => {}
                    _ = cancel.cancelled() => {}
                }
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
            &settings.amqp.url,
            &topology,
            &queue,
            prefetch,
            "stockd-consumer",
        )
        .await?;
        let wait = Duration::from_millis(self.settings.consumer.batch_wait_ms);
        loop {
            let batch = next_batch(
                &mut sub.consumer,
                self.settings.consumer.batch_max,
                wait,
                cancel,
            );
            match batch.await? {
                Batch::Deliveries(deliveries) => self.process(&sub.channel, deliveries).await?,
                Batch::Cancelled => break,
                Batch::Closed => return Err(MqError::Timeout),
            }
        }
        // Unacked prefetched deliveries go back to the queue when the channel closes.
        sub.close().await;
        Ok(())
    }

    /// One step: apply one batch of deliveries (each carrying one or more
    /// deductions) in one transaction, and settle every delivery.
    pub async fn process(
        &self,
        channel: &lapin::Channel,
        deliveries: Vec<Delivery>,
    ) -> Result<(), MqError> {
        let mut valid = Vec::with_capacity(deliveries.len());
        for delivery in deliveries {
            match message::decode(&delivery.data) {
                Ok(msgs) => valid.push((delivery, msgs)),
                Err(why) => {
                    tracing::error!(reason = %why, "consumer.poison: dead-lettering an invalid message");
                    metrics::counter!("stockd_consumer_messages_total", "outcome" => "dead_lettered").increment(1);
                    let reject = BasicNackOptions {
                        requeue: false,
                        multiple: false,
                    };
                    delivery.acker.nack(reject).await?;
                }
            }
        }
        let Some(last_tag) = valid.last().map(|(d, _)| d.delivery_tag) else {
            return Ok(());
        };
        let msgs: Vec<DeductionMessage> =
            valid.iter().flat_map(|(_, m)| m.iter().cloned()).collect();
        let retries = self.settings.consumer.deadlock_retries;
        match ledger::apply_batch(&self.db, &msgs, retries).await {
            Ok(report) => {
                channel
                    .basic_ack(last_tag, BasicAckOptions { multiple: true })
                    .await?;
                self.after_commit(&msgs, &report).await;
            }
            Err(err) => {
                tracing::warn!(error = %err, batch.size = msgs.len(), "consumer.batch: failed; applying one by one");
                for (delivery, msgs) in valid {
                    self.process_alone(delivery, msgs).await?;
                }
            }
        }
        Ok(())
    }

    /// Applies the deductions of one delivery one by one; each that still fails
    /// is parked in the retry queue (or the DLQ once its attempts are used up).
    async fn process_alone(
        &self,
        delivery: Delivery,
        msgs: Vec<DeductionMessage>,
    ) -> Result<(), MqError> {
        let retries = self.settings.consumer.deadlock_retries;
        let attempt = attempt_of(&delivery) + 1;
        let mut parked_all = true;
        for msg in msgs {
            match ledger::apply_batch(&self.db, std::slice::from_ref(&msg), retries).await {
                Ok(report) => self.after_commit(std::slice::from_ref(&msg), &report).await,
                Err(err) => parked_all &= self.park(&msg, attempt, &err).await,
            }
        }
        if parked_all {
            delivery.acker.ack(BasicAckOptions::default()).await?;
        } else {
            // Could not park a failed deduction: the broker redelivers the whole
            // message (applied ones are skipped) until its delivery limit.
            let requeue = BasicNackOptions {
                requeue: true,
                multiple: false,
            };
            delivery.acker.nack(requeue).await?;
        }
        Ok(())
    }

    /// Republishes one failed deduction to the retry queue, or to the DLQ once
    /// `amqp.max_retries` is used up. Returns whether the broker took it.
    async fn park(&self, msg: &DeductionMessage, attempt: u32, err: &crate::db::DbError) -> bool {
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
        tracing::error!(error = %err, sku.id = %msg.sku_id, request.id = %msg.request_id, attempt, outcome, "consumer.message: failed");
        let props = BasicProperties::default()
            .with_message_id(msg.message_id().into())
            .with_delivery_mode(2)
            .with_headers(headers_with_attempt(attempt));
        let parked = self
            .publisher
            .publish(exchange, key, &msg.to_bytes(), props)
            .await
            .is_ok();
        if parked {
            metrics::counter!("stockd_consumer_messages_total", "outcome" => outcome).increment(1);
        }
        parked
    }

    async fn after_commit(&self, msgs: &[DeductionMessage], report: &BatchReport) {
        metrics::counter!("stockd_consumer_batches_total").increment(1);
        metrics::histogram!("stockd_consumer_batch_size").record(msgs.len() as f64);
        metrics::counter!("stockd_consumer_messages_total", "outcome" => "applied")
            .increment(report.applied as u64);
        metrics::counter!("stockd_consumer_messages_total", "outcome" => "duplicate")
            .increment(report.duplicates as u64);
        metrics::counter!("stockd_consumer_messages_total", "outcome" => "rejected")
            .increment(report.rejected.len() as u64);
        let now_ms = crate::telemetry::unix_ms();
        for msg in msgs {
            let lag_ms = now_ms.saturating_sub(msg.created_ms);
            metrics::histogram!("stockd_persist_lag_seconds").record(lag_ms as f64 / 1000.0);
        }
        for (msg, why) in &report.rejected {
            tracing::error!(sku.id = %msg.sku_id, request.id = %msg.request_id, count = msg.count, reason = why,
                "consumer.rejected: MySQL could not apply a reservation Redis admitted");
            if let Err(err) = self.redis.mark_rejected(msg).await {
                tracing::warn!(error = %err, request.id = %msg.request_id, "consumer.rejected: Redis mirror failed; reconciler will see it");
            }
        }
    }
}
