//! `GET /v1/admin/overview`: everything the operator console shows, gathered in
//! one go and cached for [`CACHE_FOR`] per process, so any number of open
//! consoles polling once a second cost the stores one gather a second.
//!
//! Only reads, each bounded by [`PART_TIMEOUT`]; a part that fails or times out
//! is shown as unknown (`null`) or unhealthy rather than failing the whole
//! overview — the console is most needed when something is down. Nothing here
//! runs on the reserve path: reserve counts come from the counters the reserve
//! handler increments anyway (see `metrics`).

pub mod metrics;
pub mod nodes;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Serialize;

use crate::db::console::{self as queries, StatusCounts};
use crate::domain::{SaleTerms, SkuId};
use crate::ops::reconcile::{Reconciler, Report};
use crate::resources::Resources;
use metrics::{Recent, ReserveCounts};
use nodes::NodeSeen;

/// How long one gather is served to every poller of this process. Just under
/// the page's one-second poll, so each poll of a single console sees new numbers.
pub const CACHE_FOR: Duration = Duration::from_millis(900);
/// Bound on each part of a gather (one store): the page polls every second.
pub const PART_TIMEOUT: Duration = Duration::from_millis(800);
/// SKUs listed at most (the first ones by id); `skus_truncated` says when more exist.
pub const SKUS_MAX: usize = 50;
/// SKUs whose outboxes are summed at most (Redis' registry of loaded SKUs).
pub const OUTBOX_SKUS_MAX: usize = 500;

/// The console's one document.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    /// When it was gathered: ms since the Unix epoch, this host's clock.
    pub generated_at_ms: u64,
    /// The process that gathered it (`host:pid`).
    pub node: String,
    /// The first SKUs by id, at most 50.
    pub skus: Vec<SkuLine>,
    /// True when more SKUs exist than are listed.
    pub skus_truncated: bool,
    pub reservations: ReserveCounts,
    /// Orders by status in MySQL (whole orders; their lines are in the SKUs'
    /// counts); `null` when MySQL did not answer.
    pub orders: Option<StatusCounts>,
    pub pipeline: Pipeline,
    /// The reconciler's latest report in this process; `null` before its first check.
    pub reconcile: Option<ReconcileSummary>,
    pub health: Health,
    /// stockd processes heard from in the last 20 s (heartbeats in Redis).
    pub nodes: Vec<NodeSeen>,
}

/// One SKU as both stores see it.
#[derive(Debug, Clone, Serialize)]
pub struct SkuLine {
    pub sku_id: u64,
    pub total_stock: i64,
    /// Units left in Redis (what buyers are admitted against); `null` when not
    /// loaded or Redis did not answer.
    pub redis_available: Option<i64>,
    /// Units left in the MySQL ledger.
    pub mysql_available: i64,
    /// Ledger rows (reservations, not units) by status.
    pub reserved: u64,
    pub confirmed: u64,
    pub released: u64,
    pub rejected: u64,
    /// Nothing left in Redis.
    pub sold_out: bool,
    pub limit_per_user: u64,
    /// The sale window's opening and close (RFC 3339); `null`: none
    /// (docs/contract.md §19).
    pub sale_opens_at: Option<String>,
    pub sale_closes_at: Option<String>,
    /// A hold of this SKU must carry a pass.
    pub requires_pass: bool,
}

/// The way from Redis to the MySQL ledger.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Pipeline {
    /// Outbox entries not yet confirmed by the broker, all SKUs.
    pub outbox_entries: u64,
    /// Age of the oldest outbox entry (0 when empty).
    pub outbox_oldest_age_ms: u64,
    /// Deductions ready in the work queue; `null` when the broker did not answer.
    pub queue_depth: Option<u64>,
    /// Deductions waiting for a retry.
    pub retry_depth: Option<u64>,
    /// Messages dead-lettered (deduct and expiry DLQs).
    pub dlq_count: Option<u64>,
    /// Consumers attached to the work queue.
    pub consumers: Option<u64>,
    /// p99 of reservation-to-ledger lag over the last 15 s (bucket bound, ms),
    /// as measured by a consumer in this process; `null` when none ran.
    pub persist_lag_p99_ms: Option<f64>,
    /// Mean consumer batch size over the last 15 s (consumer in this process).
    pub consumer_batch_size: Option<f64>,
}

/// The reconciler's latest verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct ReconcileSummary {
    pub checked_at: String,
    /// The first 50 SKUs of the report.
    pub skus: Vec<ReconcileLine>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReconcileLine {
    pub sku_id: u64,
    /// `OK`, `IN_FLIGHT`, `REDIS_AHEAD`, `REDIS_BEHIND`, `MYSQL_INCONSISTENT`, `STUCK` or
    /// `MYSQL_BEHIND`.
    pub verdict: String,
    /// Redis `available` minus what it should hold.
    pub drift: i64,
}

/// Whether each dependency answered this gather.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Health {
    pub redis: bool,
    pub mysql: bool,
    pub broker: bool,
    /// The workers' MySQL circuit breaker is open (consumer and closer paused).
    pub mysql_breaker_open: bool,
}

/// One gather per [`CACHE_FOR`] per process, shared by every poller.
#[derive(Default)]
pub struct OverviewCache {
    /// Held across a gather: concurrent pollers wait for it instead of
    /// starting their own (single flight).
    inner: tokio::sync::Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    last: Option<(Instant, Arc<Overview>)>,
    history: metrics::History,
}

impl OverviewCache {
    /// The cached overview, or a fresh one when it is older than [`CACHE_FOR`].
    pub async fn get(
        &self,
        res: &Resources,
        reconciler: &Reconciler,
        registry: &PrometheusHandle,
    ) -> Arc<Overview> {
        let mut state = self.inner.lock().await;
        if let Some((at, overview)) = &state.last {
            if at.elapsed() < CACHE_FOR {
                return overview.clone();
            }
        }
        let now = Instant::now();
        let reading = metrics::read(&registry.render());
        let recent = state.history.push(now, &reading);
        let last_check = reconciler.last_report();
        let overview = Arc::new(gather(res, last_check, reading.reservations, recent).await);
        state.last = Some((now, overview.clone()));
        overview
    }
}

async fn bounded<T, F: std::future::Future<Output = Option<T>>>(part: F) -> Option<T> {
    tokio::time::timeout(PART_TIMEOUT, part)
        .await
        .ok()
        .flatten()
}

/// One full gather: the stores concurrently, each bounded.
pub async fn gather(
    res: &Resources,
    last_check: Option<Report>,
    reservations: ReserveCounts,
    recent: Recent,
) -> Overview {
    let (skus, orders, outbox, queues, nodes, redis_up, broker_up) = tokio::join!(
        bounded(sku_lines(res)),
        bounded(async { queries::order_counts(&res.db).await.ok() }),
        bounded(outbox(res)),
        bounded(queues(res)),
        bounded(async {
            // Our own heartbeat first, so this node always lists itself.
            let _ = nodes::heartbeat(&res.redis).await;
            nodes::seen(&res.redis).await.ok()
        }),
        bounded(async { res.redis.ping().await.ok() }),
        bounded(async { res.publisher.is_connected().await.then_some(()) }),
    );
    let mysql_up = skus.is_some();
    let (skus, skus_truncated) = skus.unwrap_or_default();
    let (outbox_entries, outbox_oldest_age_ms) = outbox.unwrap_or_default();
    let (queue_depth, retry_depth, dlq_count, consumers) = match queues {
        Some(q) => (
            Some(q.ready),
            Some(q.retry),
            Some(q.dead),
            Some(q.consumers),
        ),
        None => (None, None, None, None),
    };
    Overview {
        generated_at_ms: crate::clock::unix_ms(),
        node: nodes::this_node(),
        skus,
        skus_truncated,
        reservations,
        orders,
        pipeline: Pipeline {
            outbox_entries,
            outbox_oldest_age_ms,
            queue_depth,
            retry_depth,
            dlq_count,
            consumers,
            persist_lag_p99_ms: recent.persist_lag_p99_ms,
            consumer_batch_size: recent.consumer_batch_size,
        },
        reconcile: last_check.map(summarize),
        health: Health {
            redis: redis_up.is_some(),
            mysql: mysql_up,
            broker: broker_up.is_some() && queue_depth.is_some(),
            mysql_breaker_open: res.mysql_breaker.is_open(),
        },
        nodes: nodes.unwrap_or_default(),
    }
}

fn summarize(report: Report) -> ReconcileSummary {
    ReconcileSummary {
        checked_at: report.checked_at,
        skus: report
            .skus
            .iter()
            .take(SKUS_MAX)
            .map(|line| ReconcileLine {
                sku_id: line.sku_id,
                verdict: line.verdict.as_str().to_string(),
                drift: line.drift,
            })
            .collect(),
    }
}

/// The first SKUs from MySQL, their ledger counts, and Redis' view of each.
/// `None` when MySQL did not answer (Redis alone cannot list SKUs' totals).
async fn sku_lines(res: &Resources) -> Option<(Vec<SkuLine>, bool)> {
    let (rows, truncated) = queries::first_skus(&res.db, SKUS_MAX).await.ok()?;
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Some((Vec::new(), truncated));
    };
    let counts = queries::status_counts(&res.db, first.sku_id, last.sku_id)
        .await
        .ok()?;
    let in_redis = join_all(rows.iter().map(|row| res.redis.skus().sku(row.sku_id))).await;
    // The SKUs with sale terms (few): the rest sell to everyone, always.
    let terms: HashMap<SkuId, SaleTerms> = crate::db::sale::all_terms(&res.db)
        .await
        .unwrap_or_default()
        .into_iter()
        .collect();
    let text = |ms: Option<i64>| ms.map(|ms| crate::clock::rfc3339_ms(ms as u64));
    let lines = rows
        .iter()
        .zip(in_redis)
        .map(|(row, redis)| {
            let redis_available = redis.ok().flatten().map(|s| s.available);
            let c: StatusCounts = counts.get(&row.sku_id.get()).copied().unwrap_or_default();
            let t = terms.get(&row.sku_id).copied().unwrap_or_default();
            SkuLine {
                sku_id: row.sku_id.get(),
                total_stock: row.total_stock,
                redis_available,
                mysql_available: row.available_stock,
                reserved: c.reserved,
                confirmed: c.confirmed,
                released: c.released,
                rejected: c.rejected,
                sold_out: redis_available.is_some_and(|a| a <= 0),
                limit_per_user: u64::from(row.limit_per_user),
                sale_opens_at: text(t.opens_at_ms),
                sale_closes_at: text(t.closes_at_ms),
                requires_pass: t.requires_pass,
            }
        })
        .collect();
    Some((lines, truncated))
}

/// Outbox entries and the oldest one's age over the loaded SKUs.
async fn outbox(res: &Resources) -> Option<(u64, u64)> {
    let mut skus = res.redis.skus().registered_skus().await.ok()?;
    skus.truncate(OUTBOX_SKUS_MAX);
    let now_ms = res.redis.now_ms().await.ok()?;
    let per_sku = join_all(skus.into_iter().map(|sku| outbox_of(res, sku, now_ms))).await;
    Some(
        per_sku
            .into_iter()
            .fold((0, 0), |(n, age), (len, oldest)| (n + len, age.max(oldest))),
    )
}

async fn outbox_of(res: &Resources, sku: SkuId, now_ms: u64) -> (u64, u64) {
    let len = res.redis.outbox().len(sku).await.unwrap_or(0);
    if len == 0 {
        return (0, 0);
    }
    let oldest_ms = match res.redis.outbox().stale(sku, 0, 1).await {
        Ok(first) => first
            .first()
            .and_then(|e| e.written_ms())
            .map_or(0, |ms| now_ms.saturating_sub(ms)),
        Err(_) => 0,
    };
    (len, oldest_ms)
}

struct QueueNumbers {
    ready: u64,
    retry: u64,
    dead: u64,
    consumers: u64,
}

/// Depths of the work, retry and dead-letter queues (passive declares).
async fn queues(res: &Resources) -> Option<QueueNumbers> {
    let t = res.publisher.topology().clone();
    let (work, retry, deduct_dlq, expiry_dlq) = tokio::join!(
        queue(res, &t.deduct_queue),
        queue(res, &t.deduct_retry_queue),
        queue(res, &t.deduct_dlq),
        queue(res, &t.expiry_dlq),
    );
    let (ready, consumers) = work?;
    Some(QueueNumbers {
        ready,
        retry: retry?.0,
        dead: deduct_dlq?.0 + expiry_dlq?.0,
        consumers,
    })
}

/// `(messages ready, consumers)` of one queue.
async fn queue(res: &Resources, name: &str) -> Option<(u64, u64)> {
    let state = res.publisher.queue_state(name).await.ok()?;
    Some((u64::from(state.messages), u64::from(state.consumers)))
}
