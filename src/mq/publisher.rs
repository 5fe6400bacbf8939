//! Publishing with publisher confirms, many in flight at once.
//!
//! Each call publishes on one of a few confirm-mode channels (round robin) and
//! awaits only its own confirm, so concurrent reservations pipeline their
//! publishes instead of waiting for each other. Publish and confirm run under one
//! timeout because lapin can hang on a broker shutdown. A broken connection is
//! dropped and rebuilt on the next call; callers never undo a reservation on a
//! failure here: the outbox entry stays and the relay republishes it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::Confirmation;
use lapin::{BasicProperties, Channel, Connection};
use tokio::sync::{Mutex, RwLock};

use crate::config::TlsFiles;
use crate::domain::Deduction;

use super::{connect_any, MqError, Topology};

/// AMQP delivery mode 2: the broker writes the message to disk.
pub const PERSISTENT: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("broker refused the message (nack)")]
    Nack,
    #[error("message was unroutable and returned")]
    Returned,
    #[error("no confirm within the publish timeout")]
    Timeout,
    /// The group commit's queue of waiting deductions is full (the broker is
    /// slower than the api); the caller gets this at once instead of waiting.
    #[error("the group-commit queue is full")]
    QueueFull,
    #[error(transparent)]
    Broker(#[from] MqError),
}

impl PublishError {
    /// The same failure without its source (one batch failure is reported to
    /// every deduction of the batch).
    pub fn clone_kind(&self) -> Self {
        match self {
            Self::Nack => Self::Nack,
            Self::Returned => Self::Returned,
            Self::Timeout => Self::Timeout,
            Self::QueueFull => Self::QueueFull,
            Self::Broker(_) => Self::Broker(MqError::Timeout),
        }
    }

    /// Label of the `outcome` dimension of the publish metric.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Nack => "nack",
            Self::Returned => "returned",
            Self::Timeout => "timeout",
            Self::QueueFull => "queue_full",
            Self::Broker(_) => "error",
        }
    }
}

/// What a passive declare tells of one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueState {
    /// Messages ready for delivery (not the unacked ones).
    pub messages: u32,
    /// Consumers attached to the queue.
    pub consumers: u32,
}

struct Link {
    conn: Connection,
    channels: Vec<Channel>,
}

pub struct Publisher {
    /// Brokers tried in turn on every (re)connect (`amqp.urls`).
    urls: Vec<String>,
    /// `amqp.tls`: CA and client certificate of an `amqps://` URL.
    tls: TlsFiles,
    name: String,
    topology: Topology,
    timeout: Duration,
    channel_count: usize,
    link: RwLock<Option<Arc<Link>>>,
    connecting: Mutex<()>,
    next_channel: AtomicUsize,
}

impl Publisher {
    pub fn new(
        urls: Vec<String>,
        name: &str,
        topology: Topology,
        timeout: Duration,
        channel_count: usize,
    ) -> Self {
        assert!(channel_count >= 1, "a publisher needs a channel");
        Self {
            urls,
            tls: TlsFiles::default(),
            name: name.to_string(),
            topology,
            timeout,
            channel_count,
            link: RwLock::new(None),
            connecting: Mutex::new(()),
            next_channel: AtomicUsize::new(0),
        }
    }

    /// Connects with `amqp.tls` (the CA and client certificate of `amqps://`).
    pub fn with_tls(mut self, tls: TlsFiles) -> Self {
        self.tls = tls;
        self
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Connects (if needed) and declares the topology; used at start-up and by `/readyz`.
    pub async fn ensure_connected(&self) -> Result<(), MqError> {
        self.current_link().await.map(|_| ())
    }

    /// Whether the connection is up right now (no I/O).
    pub async fn is_connected(&self) -> bool {
        match self.link.read().await.as_ref() {
            Some(link) => link.conn.status().connected(),
            None => false,
        }
    }

    async fn current_link(&self) -> Result<Arc<Link>, MqError> {
        if let Some(link) = self.link.read().await.as_ref() {
            if link.conn.status().connected() {
                return Ok(link.clone());
            }
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(link) = self.link.read().await.as_ref() {
            if link.conn.status().connected() {
                return Ok(link.clone());
            }
        }
        let conn = connect_any(&self.urls, &self.tls, &self.name).await?;
        self.topology.declare(&conn).await?;
        let mut channels = Vec::with_capacity(self.channel_count);
        for _ in 0..self.channel_count {
            let ch = conn.create_channel().await?;
            ch.confirm_select(ConfirmSelectOptions::default()).await?;
            channels.push(ch);
        }
        let link = Arc::new(Link { conn, channels });
        *self.link.write().await = Some(link.clone());
        Ok(link)
    }

    async fn drop_link(&self) {
        *self.link.write().await = None;
    }

    /// Publishes deductions as one message to the reservations exchange. The
    /// `message_id` is the request id of a single deduction, and for a batch the
    /// first request id with the batch size (`<id>+<n>`).
    pub async fn publish_deductions(&self, msgs: &[Deduction]) -> Result<(), PublishError> {
        self.publish_traced(msgs, &[]).await
    }

    /// [`Self::publish_deductions`] with each deduction's trace context in the
    /// headers (`contexts[i]` is `msgs[i]`'s; empty: none traced).
    pub async fn publish_traced(
        &self,
        msgs: &[Deduction],
        contexts: &[Option<super::trace_context::TraceContext>],
    ) -> Result<(), PublishError> {
        let Some(message_id) = super::message::message_id_of(msgs) else {
            return Ok(());
        };
        let mut props = BasicProperties::default()
            .with_message_id(message_id.into())
            .with_content_type("application/json".into())
            .with_delivery_mode(PERSISTENT);
        let mut headers = FieldTable::default();
        super::format::stamp(&mut headers, super::format::of_deductions(msgs));
        if contexts.len() == msgs.len() {
            super::trace_context::write(&mut headers, contexts);
        }
        props = props.with_headers(headers);
        let exchange = self.topology.reservations_exchange.clone();
        self.publish(&exchange, "", &super::message::encode(msgs), props)
            .await
    }

    /// Publishes the warm-up probe `id` (`mq/probe.rs`) into the deduct
    /// queue, behind every deduction queued before it. Through the default
    /// exchange, by the queue's name: the reservations exchange would also
    /// hand it to the expiry delay queue, and so to the closer.
    pub async fn publish_probe(&self, id: &str) -> Result<(), PublishError> {
        let (props, body) = super::probe::build(id);
        let props = props.with_delivery_mode(PERSISTENT);
        let queue = self.topology.deduct_queue.clone();
        self.publish("", &queue, &body, props).await
    }

    /// `amqp.publish_timeout_ms`: the longest wait for one confirm.
    pub fn confirm_timeout(&self) -> std::time::Duration {
        self.timeout
    }

    /// Publishes `payload` and waits for its confirm. Mandatory: an unroutable
    /// message comes back as [`PublishError::Returned`], never as a silent loss.
    pub async fn publish(
        &self,
        exchange: &str,
        routing_key: &str,
        payload: &[u8],
        props: BasicProperties,
    ) -> Result<(), PublishError> {
        self.publish_with(exchange, routing_key, payload, props, true)
            .await
    }

    /// Publishes one message of events to `<p>events` and waits for its
    /// confirm. Not mandatory: an event no subscriber has bound a queue for
    /// has nobody to reach, and the broker confirms it.
    pub async fn publish_events(
        &self,
        message: &crate::events::cloud::EventMessage,
    ) -> Result<(), PublishError> {
        let props = BasicProperties::default()
            .with_message_id(message.message_id.as_str().into())
            .with_content_type(message.content_type.into())
            .with_type(message.routing_key.into())
            .with_delivery_mode(PERSISTENT);
        let exchange = self.topology.events_exchange.clone();
        self.publish_with(&exchange, message.routing_key, &message.body, props, false)
            .await
    }

    async fn publish_with(
        &self,
        exchange: &str,
        routing_key: &str,
        payload: &[u8],
        props: BasicProperties,
        mandatory: bool,
    ) -> Result<(), PublishError> {
        let attempt = async {
            let link = self.current_link().await?;
            let index = self.next_channel.fetch_add(1, Ordering::Relaxed) % link.channels.len();
            let options = BasicPublishOptions {
                mandatory,
                immediate: false,
            };
            let confirm = link.channels[index]
                .basic_publish(exchange.into(), routing_key.into(), options, payload, props)
                .await
                .map_err(MqError::from)?;
            confirm.await.map_err(MqError::from)
        };
        let result = match tokio::time::timeout(self.timeout, attempt).await {
            Err(_) => Err(PublishError::Timeout),
            Ok(Err(err)) => {
                self.drop_link().await;
                Err(PublishError::Broker(err))
            }
            Ok(Ok(Confirmation::Ack(None))) => Ok(()),
            Ok(Ok(Confirmation::Ack(Some(_)))) => Err(PublishError::Returned),
            Ok(Ok(Confirmation::Nack(_))) => {
                // A nack is broker trouble, not a full queue (no queue of ours
                // has a length limit). Seen after a RabbitMQ cluster node died
                // under load: the publisher's new channels were nacked for good
                // while a fresh connection's publishes were acked. New channels
                // on the next publish; the nacked entries stay in the outbox.
                self.drop_link().await;
                Err(PublishError::Nack)
            }
            Ok(Ok(Confirmation::NotRequested)) => {
                unreachable!("every publisher channel is in confirm mode")
            }
        };
        let outcome = match &result {
            Ok(()) => "ack",
            Err(e) => e.label(),
        };
        metrics::counter!("stockd_publish_total", "outcome" => outcome).increment(1);
        result
    }

    /// A fresh channel on the publisher's connection, for short-lived work that
    /// must not disturb the publishing channels (dead-letter browsing). The
    /// caller closes it; deliveries it left unacked then return to their queue.
    pub async fn open_channel(&self) -> Result<Channel, MqError> {
        let link = self.current_link().await?;
        Ok(link.conn.create_channel().await?)
    }

    /// Messages ready in `queue` (see [`Publisher::queue_state`]).
    pub async fn queue_depth(&self, queue: &str) -> Result<u32, MqError> {
        Ok(self.queue_state(queue).await?.messages)
    }

    /// Messages ready in `queue` and its consumers: a passive declare on a
    /// throw-away channel, so a missing queue cannot close a publishing channel.
    pub async fn queue_state(&self, queue: &str) -> Result<QueueState, MqError> {
        let link = self.current_link().await?;
        let ch = link.conn.create_channel().await?;
        let options = lapin::options::QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let declared = ch
            .queue_declare(queue.into(), options, FieldTable::default())
            .await;
        let _ = ch.close(200, "".into()).await;
        let declared = declared?;
        Ok(QueueState {
            messages: declared.message_count(),
            consumers: declared.consumer_count(),
        })
    }

    /// Closes the connection (shutdown).
    pub async fn close(&self) {
        if let Some(link) = self.link.write().await.take() {
            let _ = link.conn.close(200, "shutdown".into()).await;
        }
    }
}

/// Headers of a republished message (retry count).
pub fn headers_with_attempt(attempt: u32) -> FieldTable {
    let mut headers = FieldTable::default();
    headers.insert(
        "x-stockd-attempt".into(),
        lapin::types::AMQPValue::LongUInt(attempt),
    );
    headers
}

/// Headers of a message stockd dead-letters itself: the attempt and why, so
/// `stockd dlq list` and an operator can tell poison from anything else.
pub fn headers_with_reason(attempt: u32, reason: &str) -> FieldTable {
    let mut headers = headers_with_attempt(attempt);
    headers.insert(
        DEAD_LETTER_REASON_HEADER.into(),
        lapin::types::AMQPValue::LongString(reason.into()),
    );
    headers
}

/// Header carrying the reason stockd dead-lettered a message.
pub const DEAD_LETTER_REASON_HEADER: &str = "x-stockd-reason";
