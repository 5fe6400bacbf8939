//! Consumer: drain a preloaded backlog of deduction messages into MySQL, in
//! deductions per second. Both variants run the real consumer
//! (`roles::consumer::Consumer`, real broker, real ledger); they differ only in
//! how deductions are packed and applied: ours carries `amqp.group_max`
//! deductions per message (the api's group commit) and applies
//! `consumer.batch_max` messages per transaction; the seed's carries one
//! deduction per message and applies one message per transaction and ack.
//!
//! The backlog is published with confirms straight to the work queue (default
//! exchange) before the consumer starts, so the measurement is the drain alone.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use lapin::BasicProperties;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Checked;
use crate::drive::progress::Progress;
use crate::results::{key, PhaseResult};
use crate::stack::check::{wait_until, Expect, DRAIN_TIMEOUT};
use crate::stack::namespace::Namespace;
use stockd::db::{sku, Db};
use stockd::domain::Deduction;
use stockd::domain::{RequestId, SkuId, UserId};
use stockd::mq::publisher::PERSISTENT;
use stockd::mq::{message, Publisher};
use stockd::redis::RedisStore;
use stockd::roles::consumer::Consumer;

/// Publishes in flight while preloading: enough to keep the broker's confirm
/// pipeline full (one at a time it manages ~2,000/s).
const PRELOAD_IN_FLIGHT: usize = 512;
/// Drain poll period: one primary-key read of `sku_stock` each time.
const DRAIN_POLL: Duration = Duration::from_millis(10);
/// Publish timeout while preloading.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs both variants: `batched` messages through the configured batch size,
/// then `single` messages with one transaction per message.
pub async fn run(ns: &Namespace, batched: u64, single: u64) -> anyhow::Result<Checked> {
    let db = ns.db()?;
    let redis = Arc::new(ns.redis()?);
    redis.load_scripts().await?;
    let publisher = Arc::new(
        Publisher::new(
            ns.settings.amqp.broker_urls(),
            "stockd-bench-preload",
            ns.topology(),
            PUBLISH_TIMEOUT,
            ns.settings.amqp.publish_channels,
        )
        .with_tls(ns.settings.amqp.tls.clone()),
    );
    publisher.ensure_connected().await?;
    let mut out = Checked {
        results: Vec::new(),
        violations: Vec::new(),
    };
    // Ours: deductions grouped per message as the api's group commit publishes
    // them, applied `consumer.batch_max` messages per transaction. The seed's:
    // one deduction per message, one transaction per message.
    let group = ns.settings.amqp.group_max.clamp(1, message::BATCH_MAX);
    let variants = [
        Variant {
            key: key::CONSUMER_BATCHED,
            sku_raw: 11,
            count: batched,
            group,
            batch_max: ns.settings.consumer.batch_max,
        },
        Variant {
            key: key::CONSUMER_PER_MESSAGE,
            sku_raw: 12,
            count: single,
            group: 1,
            batch_max: 1,
        },
    ];
    let stores = (&db, &redis, &publisher);
    for variant in variants {
        let (result, violations) = drain(ns, stores, variant).await?;
        out.violations.extend(violations);
        out.results.push(result);
    }
    publisher.close().await;
    db.disconnect().await;
    Ok(out)
}

/// One variant of the consumer phase: its SKU, how many deductions, how many
/// per message, how many messages per transaction.
struct Variant {
    key: &'static str,
    sku_raw: u64,
    count: u64,
    group: usize,
    batch_max: usize,
}

/// Preloads one variant's backlog and measures a fresh consumer draining it.
async fn drain(
    ns: &Namespace,
    (db, redis, publisher): (&Db, &Arc<RedisStore>, &Arc<Publisher>),
    variant: Variant,
) -> anyhow::Result<(PhaseResult, Vec<String>)> {
    let Variant {
        key,
        sku_raw,
        count,
        group,
        batch_max,
    } = variant;
    let mut violations = Vec::new();
    let sku = SkuId::new(sku_raw)?;
    let total = i64::try_from(count)?;
    stockd::ops::sku_admin::upsert(db, redis, sku, total, 1, Default::default(), "bench").await?;
    let ttl_ms = ns.settings.reservation.ttl_secs * 1000;
    preload(publisher, sku, (count, group), ttl_ms, key).await?;
    let mut settings = ns.settings.clone();
    settings.consumer.batch_max = batch_max;
    let consumer = Consumer::new(
        Arc::new(settings),
        db.clone(),
        redis.clone(),
        publisher.clone(),
    );
    let cancel = CancellationToken::new();
    let progress = Progress::start(key, count);
    let cpu_before = crate::measure::cpu::snapshot();
    let started = Instant::now();
    let task = tokio::spawn(consumer.run_until_stopped(cancel.clone()));
    let counter = progress.counter();
    let drained = wait_until(DRAIN_TIMEOUT, DRAIN_POLL, || async {
        let taken = taken(db, sku, total).await;
        counter.store(taken as u64, std::sync::atomic::Ordering::Relaxed);
        taken >= total
    })
    .await;
    let elapsed = started.elapsed();
    let cpu_ms = cpu_before.elapsed().by_label;
    cancel.cancel();
    let _ = task.await;
    progress.finish().await;
    if !drained {
        violations.push(format!(
            "{key}: backlog not drained within {DRAIN_TIMEOUT:?}"
        ));
    }
    let expect = Expect {
        sku,
        total,
        admitted: total,
    };
    violations.extend(mysql_only(db, expect).await);
    let title =
        format!("drain {count} preloaded deductions, {group} per message, batch_max {batch_max}");
    let mut result = PhaseResult::from_rate(key, title, "deductions/s", count, elapsed);
    result.cpu_ms = cpu_ms;
    Ok((result, violations))
}

/// Publishes `count` one-unit deductions of `sku` to the work queue, `group`
/// per message (encoded as the api encodes them), with confirms.
async fn preload(
    publisher: &Publisher,
    sku: SkuId,
    (count, group): (u64, usize),
    ttl_ms: u64,
    label: &str,
) -> anyhow::Result<()> {
    let now_ms = stockd::clock::unix_ms();
    let queue = publisher.topology().deduct_queue.clone();
    let progress = Progress::start(&format!("{label} preload"), count);
    let counter = progress.counter();
    let deduction = |i: u64| Deduction {
        request_id: RequestId::parse(&format!("m{i}")).expect("valid id"),
        sku_id: sku,
        user_id: UserId::new(i + 1).expect("positive"),
        count: 1,
        created_ms: now_ms,
        expires_ms: now_ms + ttl_ms,
        order: None,
        client: None,
    };
    let group = group as u64;
    let results: Vec<_> = futures_util::stream::iter((0..count).step_by(group as usize))
        .map(|first| {
            let msgs: Vec<Deduction> = (first..(first + group).min(count)).map(deduction).collect();
            let (queue, counter) = (&queue, &counter);
            async move {
                let id = match msgs.len() {
                    1 => message::message_id(&msgs[0]),
                    n => format!("{}+{n}", message::message_id(&msgs[0])),
                };
                let props = BasicProperties::default()
                    .with_message_id(id.into())
                    .with_delivery_mode(PERSISTENT);
                let r = publisher
                    .publish("", queue, &message::encode(&msgs), props)
                    .await;
                counter.fetch_add(msgs.len() as u64, std::sync::atomic::Ordering::Relaxed);
                r
            }
        })
        .buffer_unordered(PRELOAD_IN_FLIGHT)
        .collect()
        .await;
    progress.finish().await;
    let failed = results.iter().filter(|r| r.is_err()).count();
    anyhow::ensure!(failed == 0, "preload: {failed} publishes failed");
    Ok(())
}

async fn taken(db: &Db, sku_id: SkuId, total: i64) -> i64 {
    let Ok(mut conn) = db.conn().await else {
        return 0;
    };
    match sku::get(&mut conn, sku_id).await {
        Ok(Some(row)) => total - row.available_stock,
        _ => 0,
    }
}

/// The consumer phase never touched Redis' stock, so only MySQL is checked:
/// conservation, every deduction applied once, nothing rejected.
async fn mysql_only(db: &Db, expect: Expect) -> Vec<String> {
    let mut conn = match db.conn().await {
        Ok(c) => c,
        Err(err) => return vec![format!("consumer check: {err}")],
    };
    let live = stockd::db::ledger::live_units(&mut conn, expect.sku)
        .await
        .unwrap_or(-1);
    let available = sku::get(&mut conn, expect.sku)
        .await
        .ok()
        .flatten()
        .map(|r| r.available_stock);
    let mut bad = Vec::new();
    if live != expect.admitted {
        bad.push(format!(
            "consumer: ledger live units {live}, expected {}",
            expect.admitted
        ));
    }
    if available != Some(expect.total - expect.admitted) {
        bad.push(format!(
            "consumer: MySQL available {available:?}, expected {}",
            expect.total - expect.admitted
        ));
    }
    bad
}
