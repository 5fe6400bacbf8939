//! Exchanges and queues, declared idempotently by every role at start-up.
//!
//! ```text
//! publish ──► <p>reservations (fanout) ──┬──► <p>deduct            (work, consumer group)
//!                                        └──► <p>expiry.delay.<T>s (TTL T, no consumer)
//!                                                   │ dead-letter at-least-once
//!                                                   ▼
//!                                              <p>expiry           (closer)
//! <p>deduct  ──(failed batch)──► <p>deduct.retry (TTL = retry delay) ──► back to <p>deduct
//! <p>deduct  ──(poison, or delivery limit, or retries used up)──► <p>dlx ──► <p>deduct.dlq
//! ```
//!
//! One publish feeds both the work queue and the delay queue, so a reservation
//! costs the broker one confirm. The delay queue's name carries its TTL because a
//! queue's arguments cannot change: a new `reservation.ttl_secs` gets a new queue
//! (one quorum queue per delay level, as RocketMQ has delay levels).

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, ExchangeKind};

use super::MqError;
use crate::config::AmqpSettings;

/// Every name stockd uses on the broker, derived from `amqp.queue_prefix`.
#[derive(Debug, Clone)]
pub struct Topology {
    pub reservations_exchange: String,
    pub dead_letter_exchange: String,
    pub deduct_queue: String,
    pub deduct_retry_queue: String,
    pub deduct_dlq: String,
    pub expiry_delay_queue: String,
    pub expiry_queue: String,
    pub expiry_dlq: String,
    delivery_limit: u32,
    retry_delay_ms: u64,
    expiry_delay_ms: u64,
}

impl Topology {
    pub fn new(settings: &AmqpSettings, reservation_ttl_secs: u64) -> Self {
        let p = &settings.queue_prefix;
        Self {
            reservations_exchange: format!("{p}reservations"),
            dead_letter_exchange: format!("{p}dlx"),
            deduct_queue: format!("{p}deduct"),
            deduct_retry_queue: format!("{p}deduct.retry"),
            deduct_dlq: format!("{p}deduct.dlq"),
            expiry_delay_queue: format!("{p}expiry.delay.{reservation_ttl_secs}s"),
            expiry_queue: format!("{p}expiry"),
            expiry_dlq: format!("{p}expiry.dlq"),
            delivery_limit: settings.delivery_limit,
            retry_delay_ms: settings.retry_delay_ms,
            expiry_delay_ms: reservation_ttl_secs * 1000,
        }
    }

    /// Declares everything; safe to run from every role and every restart.
    pub async fn declare(&self, ch: &Channel) -> Result<(), MqError> {
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        ch.exchange_declare(
            name(&self.reservations_exchange),
            ExchangeKind::Fanout,
            durable,
            FieldTable::default(),
        )
        .await?;
        ch.exchange_declare(
            name(&self.dead_letter_exchange),
            ExchangeKind::Direct,
            durable,
            FieldTable::default(),
        )
        .await?;

        for dlq in [&self.deduct_dlq, &self.expiry_dlq] {
            declare_queue(ch, dlq, quorum()).await?;
            bind(ch, dlq, &self.dead_letter_exchange, dlq).await?;
        }

        // Work queues: a poison message or one redelivered `delivery_limit` times
        // (crash loops) is dead-lettered instead of blocking the queue forever.
        let mut work = quorum();
        work.insert("x-delivery-limit".into(), long(self.delivery_limit as i64));
        work.insert(
            "x-dead-letter-exchange".into(),
            text(&self.dead_letter_exchange),
        );
        let mut deduct_args = work.clone();
        deduct_args.insert("x-dead-letter-routing-key".into(), text(&self.deduct_dlq));
        declare_queue(ch, &self.deduct_queue, deduct_args).await?;
        bind(ch, &self.deduct_queue, &self.reservations_exchange, "").await?;
        let mut expiry_args = work;
        expiry_args.insert("x-dead-letter-routing-key".into(), text(&self.expiry_dlq));
        declare_queue(ch, &self.expiry_queue, expiry_args).await?;

        // Timed queues: messages wait out the TTL, then are dead-lettered (through
        // the default exchange, by queue name) at-least-once into their target.
        let retry = timed(self.retry_delay_ms, &self.deduct_queue);
        declare_queue(ch, &self.deduct_retry_queue, retry).await?;
        let delay = timed(self.expiry_delay_ms, &self.expiry_queue);
        declare_queue(ch, &self.expiry_delay_queue, delay).await?;
        bind(
            ch,
            &self.expiry_delay_queue,
            &self.reservations_exchange,
            "",
        )
        .await?;
        Ok(())
    }

    /// Deletes every queue and exchange (tests clean up after themselves with it).
    pub async fn delete(&self, ch: &Channel) -> Result<(), MqError> {
        for queue in [
            &self.deduct_queue,
            &self.deduct_retry_queue,
            &self.deduct_dlq,
            &self.expiry_delay_queue,
            &self.expiry_queue,
            &self.expiry_dlq,
        ] {
            ch.queue_delete(name(queue), QueueDeleteOptions::default())
                .await?;
        }
        for exchange in [&self.reservations_exchange, &self.dead_letter_exchange] {
            ch.exchange_delete(name(exchange), ExchangeDeleteOptions::default())
                .await?;
        }
        Ok(())
    }
}

fn name(text: &str) -> ShortString {
    text.into()
}

fn text(value: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(value))
}

fn long(value: i64) -> AMQPValue {
    AMQPValue::LongLongInt(value)
}

fn quorum() -> FieldTable {
    let mut args = FieldTable::default();
    args.insert("x-queue-type".into(), text("quorum"));
    args
}

/// A quorum queue whose messages expire after `ttl_ms` into queue `target`.
/// At-least-once dead-lettering needs `reject-publish` overflow (RabbitMQ docs).
fn timed(ttl_ms: u64, target: &str) -> FieldTable {
    let mut args = quorum();
    args.insert("x-message-ttl".into(), long(ttl_ms as i64));
    args.insert("x-dead-letter-exchange".into(), text(""));
    args.insert("x-dead-letter-routing-key".into(), text(target));
    args.insert("x-dead-letter-strategy".into(), text("at-least-once"));
    args.insert("x-overflow".into(), text("reject-publish"));
    args
}

async fn declare_queue(ch: &Channel, queue: &str, args: FieldTable) -> Result<(), MqError> {
    let options = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(name(queue), options, args).await?;
    Ok(())
}

async fn bind(ch: &Channel, queue: &str, exchange: &str, key: &str) -> Result<(), MqError> {
    ch.queue_bind(
        name(queue),
        name(exchange),
        name(key),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await?;
    Ok(())
}
