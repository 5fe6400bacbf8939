//! Removes confirmed outbox entries in batches so the hot path never pays a
//! second Redis round trip per reservation. If an ack is lost (crash), the entry
//! is simply republished by the relay and skipped by the idempotent consumer.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::shared_entries::SharedEntries;
use crate::domain::OutboxPlace;
use crate::redis::outbox::OutboxStream;
use crate::redis::RedisStore;

/// Confirmed entries waiting for removal; beyond this the sender drops acks
/// (harmless: the relay republishes, the consumer skips the duplicate).
const ACK_QUEUE_CAPACITY: usize = 65_536;
/// Entries removed per XDEL pass.
const ACK_BATCH_MAX: usize = 1_000;
/// How long the first confirmed entry of a pass waits for others before the
/// XDEL: every XDEL costs its primary a wake-up, a parse and a reply whatever
/// its length, so fewer, fuller ones save Redis CPU per reservation (most on a
/// split SKU, whose entries spread over one stream per bucket). Far below
/// `relay.idle_ms`: an entry waiting here is never republished for it.
const ACK_LINGER: std::time::Duration = std::time::Duration::from_millis(10);

#[derive(Clone)]
pub struct OutboxAcker {
    tx: mpsc::Sender<(OutboxStream, OutboxPlace)>,
}

impl OutboxAcker {
    /// Starts the background task; it drains what is queued, then stops on `cancel`.
    pub fn spawn(
        redis: Arc<RedisStore>,
        cancel: CancellationToken,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(ACK_QUEUE_CAPACITY);
        let task = tokio::spawn(run(redis, rx, cancel));
        (Self { tx }, task)
    }

    /// Notes a confirmed deduction; its entry is removed once every
    /// deduction it carries was (shared_entries.rs). Never waits.
    pub fn ack(&self, stream: OutboxStream, place: OutboxPlace) {
        if self.tx.try_send((stream, place)).is_err() {
            metrics::counter!("stockd_outbox_ack_dropped_total").increment(1);
        }
    }
}

async fn run(
    redis: Arc<RedisStore>,
    mut rx: mpsc::Receiver<(OutboxStream, OutboxPlace)>,
    cancel: CancellationToken,
) {
    let mut buffer = Vec::with_capacity(ACK_BATCH_MAX);
    let mut shared = SharedEntries::default();
    loop {
        let received = tokio::select! {
            n = rx.recv_many(&mut buffer, ACK_BATCH_MAX) => n,
            _ = cancel.cancelled() => {
                // Drain what is already queued, then stop.
                rx.close();
                rx.recv_many(&mut buffer, ACK_QUEUE_CAPACITY).await
            }
        };
        if received == 0 {
            return;
        }
        if buffer.len() < ACK_BATCH_MAX && !cancel.is_cancelled() {
            tokio::select! {
                _ = tokio::time::sleep(ACK_LINGER) => {}
                _ = cancel.cancelled() => {}
            }
            while buffer.len() < ACK_BATCH_MAX {
                match rx.try_recv() {
                    Ok(ack) => buffer.push(ack),
                    Err(_) => break,
                }
            }
        }
        let now = std::time::Instant::now();
        let mut by_stream: BTreeMap<OutboxStream, Vec<String>> = BTreeMap::new();
        for (stream, place) in buffer.drain(..) {
            if let Some(id) = shared.confirmed(stream, place, now) {
                by_stream.entry(stream).or_default().push(id);
            }
        }
        shared.forget_stale(now);
        for (stream, ids) in by_stream {
            if let Err(err) = redis.outbox().delete(stream, &ids).await {
                tracing::warn!(sku.id = %stream.sku, bucket = stream.bucket, error = %err, "outbox.ack: removal failed; relay will republish");
            }
        }
    }
}
