//! Stage 2: RabbitMQ standing in for RocketMQ (SPEC §3). Topology, the deduction
//! message, and a publisher that keeps many confirms in flight.

pub mod batching;
pub mod dlq;
pub mod message;
pub mod publisher;
pub mod topology;

pub use publisher::{PublishError, Publisher};
pub use topology::Topology;

use lapin::{Connection, ConnectionProperties};

/// Failures talking to RabbitMQ.
#[derive(Debug, thiserror::Error)]
pub enum MqError {
    #[error("amqp: {0}")]
    Amqp(#[from] lapin::Error),
    #[error("amqp operation timed out")]
    Timeout,
    /// The broker ended a consumer's delivery stream (channel or connection
    /// closed, consumer cancelled); the role reconnects.
    #[error("amqp delivery stream closed")]
    ConsumerClosed,
}

/// Opens a connection; the name shows up in the management UI's connection list.
pub async fn connect(url: &str, name: &str) -> Result<Connection, MqError> {
    let props = ConnectionProperties::default().with_connection_name(name.into());
    let conn = tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect(url, props))
        .await
        .map_err(|_| MqError::Timeout)??;
    Ok(conn)
}

/// A broker that does not finish the AMQP handshake in this time is treated as down.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
