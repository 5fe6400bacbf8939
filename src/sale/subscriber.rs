//! Keeps a [`SaleBoard`] in step with MySQL: a full read after every
//! (re)subscribe (notices sent while disconnected are gone), one SKU read
//! again per notice (`T:<sku>`, `Skus::tell_sale_terms`, sent by the SKU
//! admin after a change), and a full re-read every [`REREAD_EVERY`]
//! whatever the channel said. The notices travel on the sold-out channel
//! (one channel for a deployment's Redis ACL to name), on a connection of
//! this board's own: the sold-out board runs only with `soldout.enabled`,
//! and its flags' events are dropped here unread.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::SaleBoard;
use crate::db::Db;
use crate::domain::SkuId;
use crate::redis::sku_terms::SALE_TERMS_NOTICE;
use crate::redis::RedisStore;

/// The safety net's period: a lost notice leaves a node's board stale at
/// most this long. Stale is safe for the opening (Redis's clock and the
/// SKU hash's terms decide it); it can only refuse or admit early answers
/// wrongly for this long after a change that the notice did not carry.
pub const REREAD_EVERY: Duration = Duration::from_secs(10);

/// Pause before resubscribing after the Pub/Sub connection dropped.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(100);

/// Runs the listener and the periodic re-read until cancelled.
pub async fn run_until_stopped(
    board: Arc<SaleBoard>,
    db: Db,
    redis: Arc<RedisStore>,
    cancel: CancellationToken,
) {
    let rereader = tokio::spawn(reread(board.clone(), db.clone(), cancel.clone()));
    while !cancel.is_cancelled() {
        tokio::select! {
            _ = listen(&board, &db, &redis) => {}
            _ = cancel.cancelled() => break,
        }
        tracing::warn!("sale.subscriber: Pub/Sub connection lost; resubscribing");
        if !crate::shutdown::sleep_or_cancel(RESUBSCRIBE_DELAY, &cancel).await {
            break;
        }
    }
    let _ = rereader.await;
}

/// One subscription's life: subscribe, read every SKU's terms, apply
/// notices until the connection ends.
async fn listen(board: &SaleBoard, db: &Db, redis: &RedisStore) {
    let mut pubsub = match redis.subscriptions().connect().await {
        Ok(p) => p,
        Err(err) => {
            tracing::warn!(error = %err, "sale.subscriber: cannot connect");
            return;
        }
    };
    if let Err(err) = pubsub.subscribe(redis.keys().soldout_channel()).await {
        tracing::warn!(error = %err, "sale.subscriber: cannot subscribe");
        return;
    }
    if let Err(err) = board.reload(db).await {
        tracing::warn!(error = %err, "sale.subscriber: reading the terms failed");
    }
    let mut messages = pubsub.on_message();
    while let Some(msg) = messages.next().await {
        let Ok(payload) = msg.get_payload::<String>() else {
            continue;
        };
        let Some(raw) = payload.strip_prefix(SALE_TERMS_NOTICE) else {
            continue;
        };
        let Some(sku) = raw.parse().ok().and_then(|id| SkuId::new(id).ok()) else {
            continue;
        };
        if let Err(err) = board.refresh(db, sku).await {
            tracing::warn!(sku.id = %sku, error = %err, "sale.subscriber: refresh failed");
        }
    }
}

async fn reread(board: Arc<SaleBoard>, db: Db, cancel: CancellationToken) {
    loop {
        if !crate::shutdown::sleep_or_cancel(REREAD_EVERY, &cancel).await {
            return;
        }
        if let Err(err) = board.reload(&db).await {
            // The board keeps what it had: Redis judges every hold again.
            tracing::debug!(error = %err, "sale.reread: failed");
        }
    }
}
