//! Periodic gauges every role exports: dependency health, queue depths, outbox
//! backlog, pool connections and the stock of allow-listed SKUs. Counters and
//! histograms are recorded where things happen; these are states that must be
//! polled. The worker reads the stores through the shared resources, so it sits
//! with the roles; `telemetry` only installs the recorder they are written to.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::domain::SkuId;
use crate::resources::Resources;

/// Refreshes the gauges every `metrics.refresh_secs` (at least 1 s) until `cancel`.
pub async fn run_until_stopped(res: Resources, cancel: CancellationToken) {
    let every = Duration::from_secs(res.settings.metrics.refresh_secs.max(1));
    while !cancel.is_cancelled() {
        refresh(&res).await;
        crate::shutdown::sleep_or_cancel(every, &cancel).await;
    }
}

/// One refresh of every polled gauge. Without Redis only the dependency and
/// queue gauges are refreshed: the rest would all read Redis.
pub async fn refresh(res: &Resources) {
    let redis_ok = stores_up(res).await;
    broker_up(res).await;
    events_pending(res).await;
    if !redis_ok {
        return;
    }
    // "stockd nodes seen" in the console.
    let _ = crate::ops::overview::nodes::heartbeat(&res.redis).await;
    outbox_backlog(res).await;
    pool_connections(res).await;
    sku_stock(res).await;
}

/// `stockd_events_outbox_pending`: events committed and not yet confirmed
/// by the broker (a count that only grows: the relays cannot publish).
async fn events_pending(res: &Resources) {
    if !res.settings.events.enabled {
        return;
    }
    let counted = res
        .db
        .bounded(async {
            let mut conn = res.db.conn().await?;
            crate::db::event_outbox::pending(&mut conn).await
        })
        .await;
    if let Ok(n) = counted {
        metrics::gauge!("stockd_events_outbox_pending").set(n as f64);
    }
}

/// 1.0 for up, 0.0 for down.
fn up(ok: bool) -> f64 {
    if ok {
        1.0
    } else {
        0.0
    }
}

/// `stockd_dependency_up` of Redis and MySQL (a ping each); returns whether
/// Redis answered.
async fn stores_up(res: &Resources) -> bool {
    let redis_ok = res.redis.ping().await.is_ok();
    metrics::gauge!("stockd_dependency_up", "dependency" => "redis").set(up(redis_ok));
    let mysql_ok = res.db.ping().await.is_ok();
    metrics::gauge!("stockd_dependency_up", "dependency" => "mysql").set(up(mysql_ok));
    for (dependency, ok) in [("redis", redis_ok), ("mysql", mysql_ok)] {
        if ok {
            crate::health::outage::answered(dependency);
        }
    }
    redis_ok
}

/// `stockd_queue_messages` of the work, retry and dead-letter queues, and
/// `stockd_dependency_up` of the broker (up when every queue answered).
async fn broker_up(res: &Resources) {
    let topology = res.publisher.topology().clone();
    let mut amqp_ok = true;
    for queue in [
        &topology.deduct_queue,
        &topology.deduct_retry_queue,
        &topology.deduct_dlq,
        &topology.expiry_queue,
        &topology.expiry_dlq,
    ] {
        match res.publisher.queue_depth(queue).await {
            Ok(n) => {
                metrics::gauge!("stockd_queue_messages", "queue" => queue.clone()).set(f64::from(n))
            }
            Err(_) => amqp_ok = false,
        }
    }
    metrics::gauge!("stockd_dependency_up", "dependency" => "amqp").set(up(amqp_ok));
    if amqp_ok {
        crate::health::outage::answered("amqp");
    }
}

/// `stockd_outbox_entries` and `stockd_outbox_oldest_age_seconds` over every
/// loaded SKU (left as they were when the SKU list cannot be read).
async fn outbox_backlog(res: &Resources) {
    let Ok(skus) = res.redis.skus().registered_skus().await else {
        return;
    };
    let mut backlog = 0;
    let mut oldest_ms: u64 = 0;
    let now_ms = res.redis.now_ms().await.unwrap_or(0);
    for sku in skus {
        backlog += res.redis.outbox().len(sku).await.unwrap_or(0);
        if let Ok(first) = res.redis.outbox().stale(sku, 0, 1).await {
            if let Some(ms) = first.first().and_then(|e| e.written_ms()) {
                oldest_ms = oldest_ms.max(now_ms.saturating_sub(ms));
            }
        }
    }
    metrics::gauge!("stockd_outbox_entries").set(backlog as f64);
    metrics::gauge!("stockd_outbox_oldest_age_seconds").set(oldest_ms as f64 / 1000.0);
}

/// `stockd_pool_connections` of the Redis, MySQL and AMQP pools.
async fn pool_connections(res: &Resources) {
    if let Some(pool) = res.redis.pool() {
        let redis_pool = pool.status();
        metrics::gauge!("stockd_pool_connections", "pool" => "redis", "state" => "open")
            .set(redis_pool.size as f64);
        metrics::gauge!("stockd_pool_connections", "pool" => "redis", "state" => "idle")
            .set(redis_pool.available as f64);
    } else {
        // A cluster client has no pool: one multiplexed link per node, kept
        // by redis-rs. `open` is 1 while the client is connected.
        let open = up(res.redis.cluster_link_open());
        metrics::gauge!("stockd_pool_connections", "pool" => "redis", "state" => "open").set(open);
    }
    metrics::gauge!("stockd_pool_connections", "pool" => "mysql", "state" => "max")
        .set(res.settings.mysql.pool_max as f64);
    let amqp_up = res.publisher.is_connected().await;
    metrics::gauge!("stockd_pool_connections", "pool" => "amqp", "state" => "open").set(
        if amqp_up {
            res.settings.amqp.publish_channels as f64
        } else {
            0.0
        },
    );
}

/// `stockd_sku_available` of each SKU in `metrics.sku_allowlist`, and where a
/// split SKU's stock sits (`stockd_sku_pool`, `stockd_sku_bucket_*`).
async fn sku_stock(res: &Resources) {
    for raw in &res.settings.metrics.sku_allowlist {
        let Ok(sku) = SkuId::new(*raw) else { continue };
        let Ok(Some(snapshot)) = res.redis.skus().sku(sku).await else {
            continue;
        };
        metrics::gauge!("stockd_sku_available", "sku" => sku.to_string())
            .set(snapshot.available as f64);
        // A split SKU: where its stock sits (`redis/buckets`).
        if snapshot.buckets.len() > 1 {
            metrics::gauge!("stockd_sku_pool", "sku" => sku.to_string()).set(snapshot.pool as f64);
            for b in &snapshot.buckets {
                let labels = [("sku", sku.to_string()), ("bucket", b.bucket.to_string())];
                metrics::gauge!("stockd_sku_bucket_available", &labels).set(b.available as f64);
                metrics::gauge!("stockd_sku_bucket_drained", &labels).set(up(b.drained));
            }
        }
    }
}
