//! Exchanges and queues, declared idempotently by every role at start-up.
//!
//! ```text
//! publish ──► <p>reservations (fanout) ──┬──► <p>deduct            (work, consumer group)
//!                                        └──► <p>expiry.delay.<T>s (TTL T, no consumer)
//!                                                   │ dead-letter at-least-once
//!                                                   ▼
//!                                              <p>expiry           (closer)
//!                                                   ▲ dead-letter
//! closer (an extended reservation) ──► <p>expiry.delay.<E>s (TTL E = extend_secs)
//! <p>deduct  ──(failed batch)──► <p>deduct.retry (TTL = retry delay) ──► back to <p>deduct
//! <p>deduct  ──(poison, or delivery limit, or retries used up)──► <p>dlx ──► <p>deduct.dlq
//! events ──► <p>events (topic, key = event type) ──► subscribers' own queues
//! ```
//!
//! One publish feeds both the work queue and the delay queue, so a reservation
//! costs the broker one confirm. The delay queue's name carries its TTL because a
//! queue's arguments cannot change: a new `reservation.ttl_secs` gets a new queue
//! (one quorum queue per delay level, as RocketMQ has delay levels).
//!
//! An extended reservation (`POST .../extend`) outlives its first delay
//! message: the closer finds MySQL's `expires_at` later than the message's
//! time and sends the message once more, through the default exchange, into
//! the second delay level `<p>expiry.delay.<E>s` (E = `reservation.extend_secs`,
//! the most one extension moves the time). Every delay level dead-letters into
//! the same expiry queue.

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{Channel, ExchangeKind};

use super::MqError;
use crate::config::{AmqpSettings, ReservationSettings};

/// Every name stockd uses on the broker, derived from `amqp.queue_prefix`.
#[derive(Debug, Clone)]
pub struct Topology {
    pub reservations_exchange: String,
    /// Events out: a durable topic exchange, routing key = event type.
    pub events_exchange: String,
    pub dead_letter_exchange: String,
    pub deduct_queue: String,
    pub deduct_retry_queue: String,
    pub deduct_dlq: String,
    pub expiry_delay_queue: String,
    /// The delay level an extended reservation's expiry waits in again (the
    /// closer publishes into it by name; nothing is bound to it). The same
    /// queue as `expiry_delay_queue` when `extend_secs == ttl_secs`.
    pub expiry_extended_queue: String,
    pub expiry_queue: String,
    pub expiry_dlq: String,
    delivery_limit: u32,
    retry_delay_ms: u64,
    expiry_delay_ms: u64,
    extended_delay_ms: u64,
    /// `x-quorum-initial-group-size` (0: not sent).
    group_size: u32,
}

impl Topology {
    pub fn new(settings: &AmqpSettings, reservation: &ReservationSettings) -> Self {
        let p = &settings.queue_prefix;
        let (ttl_secs, extend_secs) = (reservation.ttl_secs, reservation.extend_secs);
        Self {
            reservations_exchange: format!("{p}reservations"),
            events_exchange: format!("{p}events"),
            dead_letter_exchange: format!("{p}dlx"),
            group_size: settings.quorum_initial_group_size,
            deduct_queue: format!("{p}deduct"),
            deduct_retry_queue: format!("{p}deduct.retry"),
            deduct_dlq: format!("{p}deduct.dlq"),
            expiry_delay_queue: format!("{p}expiry.delay.{ttl_secs}s"),
            expiry_extended_queue: format!("{p}expiry.delay.{extend_secs}s"),
            expiry_queue: format!("{p}expiry"),
            expiry_dlq: format!("{p}expiry.dlq"),
            delivery_limit: settings.delivery_limit,
            retry_delay_ms: settings.retry_delay_ms,
            expiry_delay_ms: ttl_secs * 1000,
            extended_delay_ms: extend_secs * 1000,
        }
    }

    /// Declares everything; safe to run from every role and every restart.
    /// Uses channels of its own: a refused declaration closes its channel.
    pub async fn declare(&self, conn: &lapin::Connection) -> Result<(), MqError> {
        let channel = conn.create_channel().await?;
        let ch = &channel;
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
            name(&self.events_exchange),
            ExchangeKind::Topic,
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
            self.declare_queue(conn, dlq, self.quorum()).await?;
            bind(ch, dlq, &self.dead_letter_exchange, dlq).await?;
        }

        // Work queues: a poison message or one redelivered `delivery_limit` times
        // (crash loops) is dead-lettered instead of blocking the queue forever.
        let mut work = self.quorum();
        work.insert("x-delivery-limit".into(), long(self.delivery_limit as i64));
        work.insert(
            "x-dead-letter-exchange".into(),
            text(&self.dead_letter_exchange),
        );
        let mut deduct_args = work.clone();
        deduct_args.insert("x-dead-letter-routing-key".into(), text(&self.deduct_dlq));
        self.declare_queue(conn, &self.deduct_queue, deduct_args)
            .await?;
        bind(ch, &self.deduct_queue, &self.reservations_exchange, "").await?;
        let mut expiry_args = work;
        expiry_args.insert("x-dead-letter-routing-key".into(), text(&self.expiry_dlq));
        self.declare_queue(conn, &self.expiry_queue, expiry_args)
            .await?;

        // Timed queues: messages wait out the TTL, then are dead-lettered (through
        // the default exchange, by queue name) at-least-once into their target.
        let retry = self.timed(self.retry_delay_ms, &self.deduct_queue);
        self.declare_queue(conn, &self.deduct_retry_queue, retry)
            .await?;
        let delay = self.timed(self.expiry_delay_ms, &self.expiry_queue);
        self.declare_queue(conn, &self.expiry_delay_queue, delay)
            .await?;
        bind(
            ch,
            &self.expiry_delay_queue,
            &self.reservations_exchange,
            "",
        )
        .await?;
        if self.expiry_extended_queue != self.expiry_delay_queue {
            let extended = self.timed(self.extended_delay_ms, &self.expiry_queue);
            self.declare_queue(conn, &self.expiry_extended_queue, extended)
                .await?;
        }
        let _ = channel.close(200, "declared".into()).await;
        Ok(())
    }

    /// Declares one durable queue, on a channel of its own (a refusal closes
    /// it). A queue created by a build that did not send
    /// `x-quorum-initial-group-size` (or with another value) is refused by the
    /// broker as "inequivalent"; the size only matters at creation, so it is
    /// declared again without it and every other argument is still checked.
    async fn declare_queue(
        &self,
        conn: &lapin::Connection,
        queue: &str,
        args: FieldTable,
    ) -> Result<(), MqError> {
        let first = declare_on_fresh_channel(conn, queue, args.clone()).await;
        match first {
            Err(MqError::Amqp(err))
                if self.group_size > 0
                    && err.to_string().contains("x-quorum-initial-group-size") =>
            {
                let mut without = FieldTable::default();
                for (key, value) in args.inner() {
                    if key.as_str() != "x-quorum-initial-group-size" {
                        without.insert(key.clone(), value.clone());
                    }
                }
                declare_on_fresh_channel(conn, queue, without).await
            }
            other => other,
        }
    }

    /// Deletes every queue and exchange (tests clean up after themselves with it).
    pub async fn delete(&self, ch: &Channel) -> Result<(), MqError> {
        for queue in [
            &self.deduct_queue,
            &self.deduct_retry_queue,
            &self.deduct_dlq,
            &self.expiry_delay_queue,
            &self.expiry_extended_queue,
            &self.expiry_queue,
            &self.expiry_dlq,
        ] {
            ch.queue_delete(name(queue), QueueDeleteOptions::default())
                .await?;
        }
        for exchange in [
            &self.reservations_exchange,
            &self.events_exchange,
            &self.dead_letter_exchange,
        ] {
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

impl Topology {
    /// A quorum queue, with `x-quorum-initial-group-size` when configured: on
    /// a cluster its members are spread over that many nodes.
    fn quorum(&self) -> FieldTable {
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), text("quorum"));
        if self.group_size > 0 {
            args.insert(
                "x-quorum-initial-group-size".into(),
                long(i64::from(self.group_size)),
            );
        }
        args
    }

    /// A quorum queue whose messages expire after `ttl_ms` into queue `target`.
    /// At-least-once dead-lettering needs `reject-publish` overflow (RabbitMQ docs).
    fn timed(&self, ttl_ms: u64, target: &str) -> FieldTable {
        let mut args = self.quorum();
        args.insert("x-message-ttl".into(), long(ttl_ms as i64));
        args.insert("x-dead-letter-exchange".into(), text(""));
        args.insert("x-dead-letter-routing-key".into(), text(target));
        args.insert("x-dead-letter-strategy".into(), text("at-least-once"));
        args.insert("x-overflow".into(), text("reject-publish"));
        args
    }
}

async fn declare_on_fresh_channel(
    conn: &lapin::Connection,
    queue: &str,
    args: FieldTable,
) -> Result<(), MqError> {
    let ch = conn.create_channel().await?;
    let result = declare_queue(&ch, queue, args).await;
    if ch.status().connected() {
        let _ = ch.close(200, "declared".into()).await;
    }
    result
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
