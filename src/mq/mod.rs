//! Stage 2: RabbitMQ standing in for RocketMQ (contract §3). Topology, the deduction
//! message, and a publisher that keeps many confirms in flight; each deduction's
//! trace context rides in the message headers (`trace_context`).
//!
//! The only module that names the client library (`tests/it/driver_fence.rs`):
//! the consuming roles take batches of [`Delivery`] (`batching`, `delivery`)
//! and settle them through it, the properties of what they send again come
//! from `republish`, the TLS options from `tls`, the URL check from `url`.

pub mod batching;
pub mod delivery;
pub mod dlq;
pub mod format;
pub mod message;
pub mod probe;
pub mod publisher;
pub mod republish;
pub mod tls;
pub mod topology;
pub mod trace_context;
pub mod url;

pub use delivery::{Delivery, Settler};
pub use publisher::{PublishError, Publisher};
pub use topology::Topology;

use lapin::{Connection, ConnectionProperties, DefaultConnectionBuilder};

use crate::config::TlsFiles;

/// Failures talking to RabbitMQ.
#[derive(Debug, thiserror::Error)]
pub enum MqError {
    #[error("amqp: {0}")]
    Amqp(#[from] lapin::Error),
    #[error("amqp operation timed out")]
    Timeout,
    /// A file of `amqp.tls` cannot be read (the message names the key).
    #[error("amqp tls: {0}")]
    Tls(String),
    /// The broker ended a consumer's delivery stream (channel or connection
    /// closed, consumer cancelled); the role reconnects.
    #[error("amqp delivery stream closed")]
    ConsumerClosed,
}

/// Opens a connection; the name shows up in the management UI's connection list.
/// An `amqps://` URL trusts the system's roots only: roles use [`connect_with`].
pub async fn connect(url: &str, name: &str) -> Result<Connection, MqError> {
    connect_with(url, &TlsFiles::default(), name).await
}

/// Connects to the first of `urls` that answers (`amqp.urls`: the nodes of a
/// cluster, tried on every connect and reconnect, so a role whose broker died
/// moves to the next node). Each try starts at the node that answered last
/// time for this list: after a failover, reconnects go straight to the
/// survivor instead of waiting out the connect timeout of a frozen first
/// node every time. The error is the last node's.
pub async fn connect_any(
    urls: &[String],
    tls: &TlsFiles,
    name: &str,
) -> Result<Connection, MqError> {
    let list = urls.join(",");
    let start = last_good(&list, None).min(urls.len().saturating_sub(1));
    let mut last = MqError::Timeout;
    for step in 0..urls.len() {
        let i = (start + step) % urls.len();
        match connect_with(&urls[i], tls, name).await {
            Ok(conn) => {
                if i > 0 {
                    tracing::info!(
                        node = i,
                        name,
                        "amqp: connected to a later broker of amqp.urls"
                    );
                }
                last_good(&list, Some(i));
                return Ok(conn);
            }
            Err(err) => {
                tracing::warn!(node = i, name, error = %err, "amqp: broker unreachable, trying the next of amqp.urls");
                last = err;
            }
        }
    }
    Err(last)
}

/// The index of the node of `list` that answered last (0 at first); with
/// `Some(i)` records `i`. Per URL list, so processes (and tests) holding
/// several lists keep them apart.
fn last_good(list: &str, set: Option<usize>) -> usize {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static LAST_GOOD: OnceLock<Mutex<HashMap<String, usize>>> = OnceLock::new();
    let mut map = LAST_GOOD
        .get_or_init(Default::default)
        .lock()
        .expect("lock poisoned");
    match set {
        Some(i) => {
            map.insert(list.to_string(), i);
            i
        }
        None => map.get(list).copied().unwrap_or(0),
    }
}

/// [`connect`] with `amqp.tls`: its CA and client certificate shape an
/// `amqps://` connection (they are unused, and refused by config validation,
/// for `amqp://`).
pub async fn connect_with(url: &str, tls: &TlsFiles, name: &str) -> Result<Connection, MqError> {
    let props = ConnectionProperties::default().with_connection_name(name.into());
    let tls_config = tls::amqp_tls_config(tls).map_err(|e| MqError::Tls(e.to_string()))?;
    let builder = DefaultConnectionBuilder::new()?
        .with_uri_str(url.to_string())
        .with_properties(props)
        .with_tls_config(tls_config);
    let conn = tokio::time::timeout(CONNECT_TIMEOUT, builder.connect())
        .await
        .map_err(|_| MqError::Timeout)??;
    Ok(conn)
}

/// A broker that does not finish the AMQP handshake in this time is treated as down.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
