//! Collects deliveries into batches: wait for the first, then take more until the
//! batch is full or `max_wait` has passed since the first. Shared by the consumer
//! (deductions) and the closer (expiries).

use std::time::Duration;

use futures_util::{Stream, StreamExt};
use lapin::Consumer;
use tokio_util::sync::CancellationToken;

use super::delivery::{Delivery, Settler};
use super::MqError;

pub enum Batch {
    Deliveries(Vec<Delivery>),
    /// Shutdown was requested while waiting for the first delivery.
    Cancelled,
    /// The broker closed the consumer (connection lost, queue deleted).
    Closed,
}

/// The next batch from `consumer` (a subscription's delivery stream, or one
/// the caller wraps to count what it takes off it).
pub async fn next_batch<S>(
    consumer: &mut S,
    max: usize,
    max_wait: Duration,
    cancel: &CancellationToken,
) -> Result<Batch, MqError>
where
    S: Stream<Item = Result<lapin::message::Delivery, lapin::Error>> + Unpin,
{
    let first = tokio::select! {
        item = consumer.next() => item,
        _ = cancel.cancelled() => return Ok(Batch::Cancelled),
    };
    let first = match first {
        Some(delivery) => Delivery::from(delivery?),
        None => return Ok(Batch::Closed),
    };
    let mut batch = Vec::with_capacity(max);
    batch.push(first);
    let deadline = tokio::time::Instant::now() + max_wait;
    while batch.len() < max {
        match tokio::time::timeout_at(deadline, consumer.next()).await {
            Ok(Some(Ok(delivery))) => batch.push(Delivery::from(delivery)),
            // An error or a closed stream ends this batch; the next call reports it.
            Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
        }
    }
    Ok(Batch::Deliveries(batch))
}

/// A consuming subscription: the connection, its channel and the delivery stream.
pub struct Subscription {
    conn: lapin::Connection,
    channel: lapin::Channel,
    /// The deliveries, in order; [`next_batch`] takes them in batches.
    pub consumer: Consumer,
}

impl Subscription {
    /// Connects, declares the topology, sets the prefetch and starts consuming
    /// `queue` with manual acks.
    pub async fn open(
        amqp: &crate::config::AmqpSettings,
        topology: &super::Topology,
        queue: &str,
        prefetch: u16,
        tag: &str,
    ) -> Result<Self, MqError> {
        use lapin::options::{BasicConsumeOptions, BasicQosOptions};
        let conn = super::connect_any(&amqp.broker_urls(), &amqp.tls, tag).await?;
        let channel = conn.create_channel().await?;
        topology.declare(&conn).await?;
        channel
            .basic_qos(prefetch, BasicQosOptions::default())
            .await?;
        let consumer = channel
            .basic_consume(
                queue.into(),
                tag.into(),
                BasicConsumeOptions::default(),
                lapin::types::FieldTable::default(),
            )
            .await?;
        Ok(Self {
            conn,
            channel,
            consumer,
        })
    }

    /// Settles this subscription's deliveries a batch at a time.
    pub fn settler(&self) -> Settler {
        Settler::new(self.channel.clone())
    }

    /// Closes channel and connection; unacked deliveries return to the queue.
    pub async fn close(self) {
        let _ = self.channel.close(200, "shutdown".into()).await;
        let _ = self.conn.close(200, "shutdown".into()).await;
    }
}
