//! Keeps a [`SoldOutBoard`] in step with Redis.
//!
//! A dedicated Pub/Sub connection (never a pooled one: a subscribed connection
//! can run no other command) listens to the sold-out channel. After every
//! (re)subscribe the durable markers of every known SKU are reloaded, because
//! events published while we were disconnected are gone. Independently, every
//! flag is re-validated at half its TTL, so a lost "available again" event
//! costs at most one TTL of wrong refusals.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::SoldOutBoard;
use crate::domain::SkuId;
use crate::redis::RedisStore;

/// Pause before resubscribing after the Pub/Sub connection dropped.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(100);

/// Runs the listener and the re-validation loop until cancelled.
pub async fn run_until_stopped(
    board: Arc<SoldOutBoard>,
    redis: Arc<RedisStore>,
    revalidate_every: Duration,
    cancel: CancellationToken,
) {
    let revalidator = tokio::spawn(revalidate(board.clone(), revalidate_every, cancel.clone()));
    while !cancel.is_cancelled() {
        tokio::select! {
            _ = listen(&board, &redis) => {}
            _ = cancel.cancelled() => break,
        }
        tracing::warn!("soldout.subscriber: Pub/Sub connection lost; resubscribing");
        if !crate::shutdown::sleep_or_cancel(RESUBSCRIBE_DELAY, &cancel).await {
            break;
        }
    }
    let _ = revalidator.await;
}

/// One subscription's life: subscribe, reload markers, apply events until the
/// connection ends.
async fn listen(board: &SoldOutBoard, redis: &RedisStore) {
    let mut pubsub = match redis.subscriptions().connect().await {
        Ok(p) => p,
        Err(err) => {
            tracing::warn!(error = %err, "soldout.subscriber: cannot connect");
            return;
        }
    };
    if let Err(err) = pubsub.subscribe(redis.keys().soldout_channel()).await {
        tracing::warn!(error = %err, "soldout.subscriber: cannot subscribe");
        return;
    }
    if let Err(err) = reload(board, redis).await {
        tracing::warn!(error = %err, "soldout.subscriber: marker reload failed");
        board.clear_all();
    }
    let mut messages = pubsub.on_message();
    while let Some(msg) = messages.next().await {
        let Ok(payload) = msg.get_payload::<String>() else {
            continue;
        };
        let Some((kind, raw)) = payload.split_once(':') else {
            continue;
        };
        let Some((sku, bucket)) = parse_subject(raw) else {
            continue;
        };
        match kind {
            "S" => {
                if let Err(err) = board.refresh(sku, bucket).await {
                    tracing::warn!(sku.id = %sku, bucket, error = %err, "soldout.subscriber: refresh failed");
                }
            }
            "A" => board.clear(sku, bucket),
            _ => {}
        }
    }
}

/// `<sku>` (a SKU in one bucket) or `<sku>.<bucket>` (a bucket of a split SKU).
fn parse_subject(raw: &str) -> Option<(SkuId, u16)> {
    let (sku, bucket) = match raw.split_once('.') {
        Some((sku, bucket)) => (sku, bucket.parse().ok()?),
        None => (raw, 0),
    };
    Some((SkuId::new(sku.parse().ok()?).ok()?, bucket))
}

/// Sets every flag from the durable markers of every known SKU.
async fn reload(board: &SoldOutBoard, redis: &RedisStore) -> Result<(), crate::redis::RedisError> {
    board.clear_all();
    for sku in redis.skus().registered_skus().await? {
        for bucket in redis.buckets().layout(sku).await?.buckets() {
            board.refresh(sku, bucket).await?;
        }
    }
    Ok(())
}

async fn revalidate(board: Arc<SoldOutBoard>, every: Duration, cancel: CancellationToken) {
    loop {
        if !crate::shutdown::sleep_or_cancel(every, &cancel).await {
            return;
        }
        for (sku, bucket) in board.flagged() {
            if let Err(err) = board.refresh(sku, bucket).await {
                // Unreachable Redis: let the flag age out; requests then go to
                // Redis and fail there (503) rather than trusting a stale flag.
                tracing::debug!(sku.id = %sku, error = %err, "soldout.revalidate: failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_names_a_sku_or_one_of_its_buckets() {
        let sku = SkuId::new(42).unwrap();
        assert_eq!(parse_subject("42"), Some((sku, 0)));
        assert_eq!(parse_subject("42.2"), Some((sku, 2)));
        assert_eq!(parse_subject("42.x"), None);
        assert_eq!(parse_subject("0"), None);
    }
}
