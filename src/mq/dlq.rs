//! Broker side of dead letters: browse a dead-letter queue without removing
//! anything, republish what an operator chose, and acknowledge only what was
//! safely moved.
//!
//! A DLQ has no consumer. A [`DlqSession`] opens its own channel, takes messages
//! with `basic.get` *without* acknowledging them (so nobody else sees them while
//! the session holds them) and, when it closes, every message it did not
//! acknowledge goes back to the queue. Browsing is therefore non-destructive:
//! a message only gains its `redelivered` flag (and, on quorum queues, one more
//! in its delivery count: RabbitMQ 3.x sets no delivery limit on these queues,
//! but 4.0–4.2 default to 20 and count such returns — see docs/operations.md).
//!
//! Republishing goes through the default exchange straight to one queue (never
//! the reservations fanout, which would also put copies into the delay queue),
//! persistent and `mandatory`, and waits for the publisher confirm; a caller
//! acknowledges the dead letter only after that confirm, so a crash at any point
//! leaves the message in the DLQ (at worst applied twice, which the idempotent
//! consumer absorbs).

use std::time::Duration;

use lapin::options::{BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Confirmation};

use crate::domain::Deduction;

use super::{message, MqError, PublishError, Publisher};

/// Header the consumer sets on what it dead-letters: why, in its own words.
pub const REASON_HEADER: &str = "x-stockd-reason";
/// Header counting a message's trips through the retry queue.
pub const ATTEMPT_HEADER: &str = "x-stockd-attempt";

/// Longest wait for one broker operation (get, publish + confirm, ack): lapin
/// can hang on a broker shutdown, and an operator tool must not.
const OP_TIMEOUT: Duration = Duration::from_secs(10);

/// Headers that describe a past dead-lettering; a message republished to its
/// work queue drops them so its next dead-lettering starts a clean history.
const DEATH_HEADERS: &[&str] = &[
    "x-death",
    "x-first-death-exchange",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-last-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
    "x-delivery-count",
    REASON_HEADER,
];

/// One message taken from a DLQ and not yet acknowledged.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub delivery_tag: u64,
    pub body: Vec<u8>,
    pub properties: BasicProperties,
}

impl DeadLetter {
    /// The deductions it carries; `Err` for a poison message.
    pub fn deductions(&self) -> Result<Vec<Deduction>, String> {
        message::decode(&self.body)
    }

    /// Why it was dead-lettered: the consumer's `x-stockd-reason`, else the
    /// broker's latest `x-death` reason (`rejected`, `delivery_limit`, `expired`,
    /// `maxlen`), else `x-first-death-reason`.
    pub fn reason(&self) -> Option<String> {
        let headers = self.properties.headers().as_ref()?;
        let map = headers.inner();
        if let Some(reason) = map.get(REASON_HEADER).and_then(text) {
            return Some(reason);
        }
        let latest_death = map.get("x-death").and_then(|v| match v {
            AMQPValue::FieldArray(deaths) => deaths.as_slice().first().cloned(),
            _ => None,
        });
        if let Some(AMQPValue::FieldTable(death)) = latest_death {
            if let Some(reason) = death.inner().get("reason").and_then(text) {
                return Some(reason);
            }
        }
        map.get("x-first-death-reason").and_then(text)
    }

    /// Retry attempts the consumer recorded (`x-stockd-attempt`), if any.
    pub fn attempt(&self) -> Option<u32> {
        let headers = self.properties.headers().as_ref()?;
        match headers.inner().get(ATTEMPT_HEADER)? {
            AMQPValue::LongUInt(n) => Some(*n),
            AMQPValue::LongInt(n) => u32::try_from(*n).ok(),
            AMQPValue::LongLongInt(n) => u32::try_from(*n).ok(),
            AMQPValue::ShortUInt(n) => Some(u32::from(*n)),
            AMQPValue::ShortInt(n) => u32::try_from(*n).ok(),
            AMQPValue::ShortShortUInt(n) => Some(u32::from(*n)),
            AMQPValue::ShortShortInt(n) => u32::try_from(*n).ok(),
            _ => None,
        }
    }

    pub fn message_id(&self) -> Option<String> {
        self.properties
            .message_id()
            .as_ref()
            .map(|id| id.to_string())
    }

    /// Properties for sending (part of) it back to a work queue: the death
    /// history dropped, `x-stockd-attempt` kept (so a deduction that fails once
    /// more returns to the DLQ instead of cycling through the retries).
    pub fn properties_for_replay(&self, message_id: Option<String>) -> BasicProperties {
        let mut kept = FieldTable::default();
        if let Some(headers) = self.properties.headers() {
            for (name, value) in headers {
                if !DEATH_HEADERS.contains(&name.as_str()) {
                    kept.insert(name.clone(), value.clone());
                }
            }
        }
        with_message_id(self.properties.clone(), message_id).with_headers(kept)
    }

    /// Properties for putting part of it back into the DLQ: every header kept.
    pub fn properties_for_return(&self, message_id: Option<String>) -> BasicProperties {
        with_message_id(self.properties.clone(), message_id)
    }
}

fn with_message_id(props: BasicProperties, message_id: Option<String>) -> BasicProperties {
    let props = props
        .with_delivery_mode(super::publisher::PERSISTENT)
        .with_content_type("application/json".into());
    match message_id {
        Some(id) => props.with_message_id(id.into()),
        None => props,
    }
}

fn text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::LongString(s) => Some(s.to_string()),
        AMQPValue::ShortString(s) => Some(s.to_string()),
        _ => None,
    }
}

/// What one browse took from the queue.
#[derive(Debug, Default)]
pub struct Fetched {
    pub letters: Vec<DeadLetter>,
    /// Messages the broker still had ready when the browse stopped at its bound.
    pub left_unread: u32,
}

/// One channel holding dead letters of one queue until it is closed.
pub struct DlqSession {
    channel: Channel,
    queue: String,
}

impl DlqSession {
    /// A confirm-mode channel on the publisher's connection, reading `queue`.
    pub async fn open(publisher: &Publisher, queue: &str) -> Result<Self, MqError> {
        let channel = timed(publisher.open_channel()).await?;
        let confirm = channel.confirm_select(ConfirmSelectOptions::default());
        timed(async { confirm.await.map_err(MqError::from) }).await?;
        Ok(Self {
            channel,
            queue: queue.to_string(),
        })
    }

    /// Takes up to `max` messages, unacknowledged; `progress` hears the count
    /// taken so far every [`PROGRESS_EVERY`] messages.
    pub async fn fetch(
        &self,
        max: usize,
        progress: &mut (dyn FnMut(usize) + Send),
    ) -> Result<Fetched, MqError> {
        let mut fetched = Fetched::default();
        while fetched.letters.len() < max {
            let get = self.channel.basic_get(
                self.queue.as_str().into(),
                BasicGetOptions { no_ack: false },
            );
            let Some(got) = timed(async { get.await.map_err(MqError::from) }).await? else {
                fetched.left_unread = 0;
                return Ok(fetched);
            };
            fetched.left_unread = got.message_count;
            let delivery = got.delivery;
            fetched.letters.push(DeadLetter {
                delivery_tag: delivery.delivery_tag,
                body: delivery.data,
                properties: delivery.properties,
            });
            if fetched.letters.len() % PROGRESS_EVERY == 0 {
                progress(fetched.letters.len());
            }
        }
        Ok(fetched)
    }

    /// Publishes `payload` to `queue` through the default exchange and waits
    /// for the broker's confirm; an unroutable (returned) message is a failure.
    pub async fn publish_to_queue(
        &self,
        queue: &str,
        payload: &[u8],
        props: BasicProperties,
    ) -> Result<(), PublishError> {
        let options = BasicPublishOptions {
            mandatory: true,
            immediate: false,
        };
        let attempt = async {
            let confirm = self
                .channel
                .basic_publish("".into(), queue.into(), options, payload, props)
                .await
                .map_err(MqError::from)?;
            confirm.await.map_err(MqError::from)
        };
        match tokio::time::timeout(OP_TIMEOUT, attempt).await {
            Err(_) => Err(PublishError::Timeout),
            Ok(Err(err)) => Err(PublishError::Broker(err)),
            Ok(Ok(Confirmation::Ack(None))) => Ok(()),
            Ok(Ok(Confirmation::Ack(Some(_)))) => Err(PublishError::Returned),
            Ok(Ok(Confirmation::Nack(_))) => Err(PublishError::Nack),
            Ok(Ok(Confirmation::NotRequested)) => {
                unreachable!("a DLQ session's channel is in confirm mode")
            }
        }
    }

    /// Removes a dead letter from the queue for good.
    pub async fn ack(&self, letter: &DeadLetter) -> Result<(), MqError> {
        let ack = self
            .channel
            .basic_ack(letter.delivery_tag, BasicAckOptions { multiple: false });
        timed(async { ack.await.map_err(MqError::from) }).await
    }

    /// Closes the channel: every message not acknowledged returns to the queue.
    pub async fn close(self) {
        let close = self.channel.close(200, "dlq session done".into());
        let _ = tokio::time::timeout(OP_TIMEOUT, close).await;
    }
}

/// Messages between two progress reports of a browse.
pub const PROGRESS_EVERY: usize = 500;

async fn timed<T>(op: impl std::future::Future<Output = Result<T, MqError>>) -> Result<T, MqError> {
    tokio::time::timeout(OP_TIMEOUT, op)
        .await
        .map_err(|_| MqError::Timeout)?
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{FieldArray, LongString};

    fn letter(headers: FieldTable) -> DeadLetter {
        DeadLetter {
            delivery_tag: 1,
            body: Vec::new(),
            properties: BasicProperties::default()
                .with_headers(headers)
                .with_message_id("m-1".into()),
        }
    }

    fn long(s: &str) -> AMQPValue {
        AMQPValue::LongString(LongString::from(s))
    }

    fn death(reason: &str) -> FieldTable {
        let mut death = FieldTable::default();
        death.insert("reason".into(), long(reason));
        death.insert("queue".into(), long("stockd.deduct"));
        death
    }

    #[test]
    fn the_consumers_reason_wins_over_the_brokers_death_record() {
        let mut headers = FieldTable::default();
        let deaths = vec![
            AMQPValue::FieldTable(death("delivery_limit")),
            AMQPValue::FieldTable(death("rejected")),
        ];
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(deaths)),
        );
        assert_eq!(
            letter(headers.clone()).reason().as_deref(),
            Some("delivery_limit")
        );
        headers.insert(REASON_HEADER.into(), long("retries_exhausted"));
        headers.insert(ATTEMPT_HEADER.into(), AMQPValue::LongUInt(6));
        let both = letter(headers);
        assert_eq!(both.reason().as_deref(), Some("retries_exhausted"));
        assert_eq!(both.attempt(), Some(6));
        assert_eq!(letter(FieldTable::default()).reason(), None);
        assert_eq!(letter(FieldTable::default()).attempt(), None);
    }

    #[test]
    fn a_replay_drops_the_death_history_and_keeps_the_attempt_count() {
        let mut headers = FieldTable::default();
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death(
                "rejected",
            ))])),
        );
        headers.insert("x-first-death-reason".into(), long("rejected"));
        headers.insert(REASON_HEADER.into(), long("retries_exhausted"));
        headers.insert(ATTEMPT_HEADER.into(), AMQPValue::LongUInt(6));
        let dead = letter(headers);
        let replay = dead.properties_for_replay(None);
        let kept = replay.headers().as_ref().unwrap().inner();
        assert_eq!(
            kept.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            [ATTEMPT_HEADER]
        );
        assert_eq!(replay.message_id().as_ref().unwrap().as_str(), "m-1");
        assert_eq!(*replay.delivery_mode(), Some(2));
        let back = dead.properties_for_return(Some("r-2".into()));
        assert!(back.headers().as_ref().unwrap().contains_key("x-death"));
        assert_eq!(back.message_id().as_ref().unwrap().as_str(), "r-2");
    }
}
