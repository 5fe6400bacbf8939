//! A delivery as the consuming roles (consumer, closer) see it: its body,
//! what its headers say (warm-up probe, format version, retry attempt, trace
//! contexts), and the three ways to settle it — ack, requeue, reject. The
//! AMQP options behind each (`multiple`, `requeue`) are chosen here once, so
//! the roles say what they mean and never name the client library; a batch
//! is settled in one frame through its channel's [`Settler`].

use lapin::options::{BasicAckOptions, BasicNackOptions};
use lapin::types::AMQPValue;
use lapin::BasicProperties;

use super::publisher::{headers_with_reason, PERSISTENT};
use super::trace_context::{self, TraceContext};
use super::{format, probe, MqError};

/// Header of the retry attempt a republished message carries.
const ATTEMPT_HEADER: &str = "x-stockd-attempt";

/// One message taken off a queue, unsettled until one of its settling
/// methods (or the channel's close, which returns it) says otherwise.
pub struct Delivery {
    inner: lapin::message::Delivery,
}

impl From<lapin::message::Delivery> for Delivery {
    fn from(inner: lapin::message::Delivery) -> Self {
        Self { inner }
    }
}

impl Delivery {
    /// The message body.
    pub fn data(&self) -> &[u8] {
        &self.inner.data
    }

    /// Its place on the channel, for settling everything up to it at once
    /// ([`Settler`]).
    pub fn tag(&self) -> u64 {
        self.inner.delivery_tag
    }

    /// The warm-up probe id it carries (`mq/probe.rs`); `None`: a deduction.
    pub fn probe_id(&self) -> Option<String> {
        probe::id_of(&self.inner.properties)
    }

    /// `Err` with the dead-letter reason when its format is newer than this
    /// release reads (`mq/format.rs`).
    pub fn format_check(&self) -> Result<(), String> {
        format::check(format::of(&self.inner.properties))
    }

    /// The retry attempt it carries (0 for a first delivery).
    pub fn attempt(&self) -> u32 {
        self.inner
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(ATTEMPT_HEADER).cloned())
            .and_then(|v| match v {
                AMQPValue::LongUInt(n) => Some(n),
                AMQPValue::LongInt(n) => u32::try_from(n).ok(),
                AMQPValue::LongLongInt(n) => u32::try_from(n).ok(),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// The trace context each of its `n` deductions carries (`mq/trace_context.rs`).
    pub fn trace_contexts(&self, n: usize) -> Vec<Option<TraceContext>> {
        trace_context::read(self.inner.properties.headers().as_ref(), n)
    }

    /// The properties of this message dead-lettered by stockd itself: the
    /// next attempt and `reason` in its headers, its format version and
    /// message id kept, so a replay is read as what it is.
    pub fn dead_letter_properties(&self, reason: &str) -> BasicProperties {
        let mut headers = headers_with_reason(self.attempt() + 1, reason);
        let format = (self.inner.properties.headers().as_ref())
            .and_then(|h| h.inner().get(format::FORMAT_HEADER).cloned());
        if let Some(format) = format {
            headers.insert(format::FORMAT_HEADER.into(), format);
        }
        let mut props = BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_headers(headers);
        if let Some(id) = self.inner.properties.message_id() {
            props = props.with_message_id(id.clone());
        }
        props
    }

    /// Done with: the broker forgets it.
    pub async fn ack(&self) -> Result<(), MqError> {
        self.inner.acker.ack(BasicAckOptions::default()).await?;
        Ok(())
    }

    /// Back to its queue, to be delivered again (a redelivery, counted by a
    /// quorum queue's delivery limit).
    pub async fn requeue(&self) -> Result<(), MqError> {
        let requeue = BasicNackOptions {
            requeue: true,
            multiple: false,
        };
        self.inner.acker.nack(requeue).await?;
        Ok(())
    }

    /// Refused for good: the broker dead-letters it (its queue's DLX).
    pub async fn reject(&self) -> Result<(), MqError> {
        let reject = BasicNackOptions {
            requeue: false,
            multiple: false,
        };
        self.inner.acker.nack(reject).await?;
        Ok(())
    }
}

/// Settles a batch of a subscription's deliveries in one frame: every
/// delivery of the channel up to a tag at once (AMQP `multiple`).
#[derive(Clone)]
pub struct Settler {
    channel: lapin::Channel,
}

impl Settler {
    pub(super) fn new(channel: lapin::Channel) -> Self {
        Self { channel }
    }

    /// Acks every delivery up to and including `tag`.
    pub async fn ack_through(&self, tag: u64) -> Result<(), MqError> {
        let multiple = BasicAckOptions { multiple: true };
        self.channel.basic_ack(tag, multiple).await?;
        Ok(())
    }

    /// Requeues every unsettled delivery up to and including `tag`.
    pub async fn requeue_through(&self, tag: u64) -> Result<(), MqError> {
        let requeue = BasicNackOptions {
            requeue: true,
            multiple: true,
        };
        self.channel.basic_nack(tag, requeue).await?;
        Ok(())
    }
}
