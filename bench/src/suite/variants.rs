//! Variants of `reserve_redis`, each measured right after it in a child of its
//! own with one thing changed, so `ratios.rs` can say what that one thing
//! costs the hot path: generous rate limits (`reserve_redis_limited`), a
//! console polling the overview (`reserve_redis_console`), and TLS on the
//! listener plus a required client token (`reserve_redis_secured`, bracketed
//! by two unchanged children, `reserve_redis_control` before it and
//! `reserve_redis_control_after` after it, so its "off" is measured next to
//! it and not minutes earlier on a box whose speed drifts); and of
//! `reserve_queue`, distributed tracing exported to a collector stand-in at a
//! 1 % sample (`reserve_queue_traced`) and at 100 % (`reserve_queue_traced_all`),
//! and events on (`reserve_queue_events_on`) bracketed by two children with
//! events off.

use std::path::Path;
use std::time::Duration;

use super::{plan, sku_base, Collected, SKU_RESERVE};
use crate::args::BenchArgs;
use crate::drive::progress::note;
use crate::phases;
use crate::results::key;
use crate::stack::check::wait_until;
use crate::stack::check::Target;
use crate::stack::child::{free_loopback_port, StockdChild};
use crate::stack::namespace::Namespace;
use crate::stack::otlp_sink::OtlpSink;
use crate::stack::secured::{SecuredListener, SERVER_NAME};
use stockd::config::Durability;

/// Rate limits switched on for `reserve_redis_limited`: generous enough never to
/// refuse the bench's load (unique buyers, one client IP), so the phase measures
/// what the limits cost — the bucket in the reserve script and the per-IP table.
const GENEROUS_LIMITS: [(&str, &str); 4] = [
    ("STOCKD__LIMITS__PER_USER_RPS", "1000"),
    ("STOCKD__LIMITS__PER_USER_BURST", "1000"),
    ("STOCKD__LIMITS__PER_IP_RPS", "10000000"),
    ("STOCKD__LIMITS__PER_IP_BURST", "10000000"),
];
/// How long a traced child gets to send its first export after the phase.
const FIRST_EXPORT_WAIT: Duration = Duration::from_secs(10);

/// Runs every variant of `reserve_redis` in turn; false after the first with a violation.
pub async fn run(args: &BenchArgs, ns: &Namespace, out: &mut Collected) -> anyhow::Result<bool> {
    let limited = Variant {
        label: "child-redis-limited",
        key: key::RESERVE_REDIS_LIMITED,
        title: "POST reservations, durability: redis, rate limits on",
        env: GENEROUS_LIMITS.to_vec(),
        console_polling: false,
        secured: None,
        durability: Durability::Redis,
        sink: None,
        events: None,
    };
    if !variant_reserve(args, ns, out, limited).await? {
        return Ok(false);
    }
    let console = Variant {
        label: "child-redis-console",
        key: key::RESERVE_REDIS_CONSOLE,
        title: "POST reservations, durability: redis, console polling the overview",
        env: Vec::new(),
        console_polling: true,
        secured: None,
        durability: Durability::Redis,
        sink: None,
        events: None,
    };
    if !variant_reserve(args, ns, out, console).await? {
        return Ok(false);
    }
    let control = |label, key| Variant {
        label,
        key,
        title: "POST reservations, durability: redis, unchanged (control)",
        env: Vec::new(),
        console_polling: false,
        secured: None,
        durability: Durability::Redis,
        sink: None,
        events: None,
    };
    let before = control("child-redis-control", key::RESERVE_REDIS_CONTROL);
    if !variant_reserve(args, ns, out, before).await? || !secured_reserve(args, ns, out).await? {
        return Ok(false);
    }
    let after = control(
        "child-redis-control-after",
        key::RESERVE_REDIS_CONTROL_AFTER,
    );
    variant_reserve(args, ns, out, after).await
}

/// `reserve_redis` again over TLS with a client token (`auth.required`).
async fn secured_reserve(
    args: &BenchArgs,
    ns: &Namespace,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    let dir = Path::new(&args.out_dir).join("secured-pki");
    let secured = match SecuredListener::generate(&dir)? {
        Ok(secured) => secured,
        Err(why) => {
            note(&format!("skipping {}: {why}", key::RESERVE_REDIS_SECURED));
            return Ok(true);
        }
    };
    let env = secured
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let variant = Variant {
        label: "child-redis-secured",
        key: key::RESERVE_REDIS_SECURED,
        title: "POST reservations, durability: redis, TLS listener + client token",
        env,
        console_polling: false,
        secured: Some(&secured),
        durability: Durability::Redis,
        sink: None,
        events: None,
    };
    variant_reserve(args, ns, out, variant).await
}

/// The traced variants of `reserve_queue`: the child exports its spans over
/// OTLP/HTTP to an [`OtlpSink`] in this process, at a 1 % and a 100 % sample.
pub async fn traced(args: &BenchArgs, ns: &Namespace, out: &mut Collected) -> anyhow::Result<bool> {
    let sink = OtlpSink::start().await?;
    let endpoint = sink.endpoint();
    let runs = [
        (
            "child-queue-traced",
            key::RESERVE_QUEUE_TRACED,
            "POST reservations, durability: queue, tracing at a 1 % sample",
            "0.01",
        ),
        (
            "child-queue-traced-all",
            key::RESERVE_QUEUE_TRACED_ALL,
            "POST reservations, durability: queue, tracing at 100 %",
            "1",
        ),
    ];
    for (label, key, title, ratio) in runs {
        let variant = Variant {
            label,
            key,
            title,
            env: vec![
                ("STOCKD__TELEMETRY__OTLP__ENDPOINT", endpoint.as_str()),
                ("STOCKD__TELEMETRY__OTLP__SAMPLE_RATIO", ratio),
            ],
            console_polling: false,
            secured: None,
            durability: Durability::Queue,
            sink: Some(&sink),
            events: None,
        };
        if !variant_reserve(args, ns, out, variant).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `reserve_queue` with events on (the default: `reserved` events beside the
/// deductions, `persisted` staged by the consumer and published by the
/// event relay), bracketed by two children with `events.enabled: false`.
pub async fn events(args: &BenchArgs, ns: &Namespace, out: &mut Collected) -> anyhow::Result<bool> {
    let runs = [
        (
            "child-queue-events-off",
            key::RESERVE_QUEUE_EVENTS_OFF,
            "false",
        ),
        (
            "child-queue-events-on",
            key::RESERVE_QUEUE_EVENTS_ON,
            "true",
        ),
        (
            "child-queue-events-off-after",
            key::RESERVE_QUEUE_EVENTS_OFF_AFTER,
            "false",
        ),
    ];
    for (label, key, enabled) in runs {
        let variant = Variant {
            events: Some(enabled == "true"),
            label,
            key,
            title: if enabled == "true" {
                "POST reservations, durability: queue, events on"
            } else {
                "POST reservations, durability: queue, events off"
            },
            env: vec![("STOCKD__EVENTS__ENABLED", enabled)],
            console_polling: false,
            secured: None,
            durability: Durability::Queue,
            sink: None,
        };
        if !variant_reserve(args, ns, out, variant).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The violation, if any, of a child that was to publish events (`on`) or
/// not: read from its `/metrics` (`stockd_events_published_total` by type),
/// waiting a little for the consumer and the event relay to catch up.
async fn events_published(addr: std::net::SocketAddr, key: &str, on: bool) -> Option<String> {
    use crate::stack::round_trips::read_counter;
    const PUBLISHED: &str = "stockd_events_published_total";
    let of = |kind: &'static str| read_counter(addr, PUBLISHED, kind);
    let seen = wait_until(
        FIRST_EXPORT_WAIT,
        Duration::from_millis(100),
        || async move {
            let reserved = of("stockd.reservation.reserved").await.unwrap_or(0.0);
            let persisted = of("stockd.reservation.persisted").await.unwrap_or(0.0);
            !on || (reserved > 0.0 && persisted > 0.0)
        },
    )
    .await;
    let all = read_counter(addr, PUBLISHED, "").await.unwrap_or(0.0);
    match (on, seen, all) {
        (true, false, _) => Some(format!("{key}: no reserved and persisted events published")),
        (false, _, n) if n > 0.0 => Some(format!("{key}: {n} events published with events off")),
        _ => None,
    }
}

/// A variant of `reserve_redis` (or `reserve_queue`), measured in its own child.
struct Variant<'a> {
    label: &'static str,
    key: &'static str,
    title: &'static str,
    /// Extra `STOCKD__…` settings of the child.
    env: Vec<(&'a str, &'a str)>,
    /// A console polls `GET /v1/admin/overview` once a second meanwhile.
    console_polling: bool,
    /// The child's listener speaks TLS and wants this client's token.
    secured: Option<&'a SecuredListener>,
    durability: Durability,
    /// The child exports spans here; the phase fails if none arrive.
    sink: Option<&'a OtlpSink>,
    /// Whether the child publishes events: on, the phase fails unless it
    /// published both `reserved` and `persisted` events; off, unless it
    /// published none (`None`: not checked).
    events: Option<bool>,
}

/// Runs one [`Variant`] of the reserve phase; its ratio to `reserve_redis` is
/// computed in `ratios.rs` (two phases of the same run).
async fn variant_reserve(
    args: &BenchArgs,
    ns: &Namespace,
    out: &mut Collected,
    variant: Variant<'_>,
) -> anyhow::Result<bool> {
    let out_dir = Path::new(&args.out_dir);
    let label = variant.label;
    note(&format!("starting stockd --role all ({label})"));
    let addr = free_loopback_port()?;
    if let Some(secured) = variant.secured {
        crate::drive::tls_target::register(addr, SERVER_NAME, &secured.ca_file)?;
    }
    let child =
        StockdChild::start_at(ns, variant.durability, label, out_dir, &variant.env, addr).await?;
    let stores = ns.stores()?;
    let mut target = Target::child(child.addr, &ns.admin_token, &stores);
    target.client_token = variant.secured.map(|s| s.token.as_str());
    note(&format!("phase {}", variant.key));
    let sku = sku_base(args) + SKU_RESERVE;
    let poller = variant
        .console_polling
        .then(|| phases::console::Poller::start(child.addr, &ns.admin_token));
    let checked = phases::reserve::reserve(
        &target,
        variant.key,
        variant.title.to_string(),
        sku,
        plan(args.requests),
        args.concurrency,
    );
    let mut checked = checked.await?;
    if let Some(poller) = poller {
        checked.violations.extend(poller.stop().await.violation());
    }
    if let Some(sink) = variant.sink {
        let exported = wait_until(FIRST_EXPORT_WAIT, Duration::from_millis(100), || {
            let any = sink.exports() > 0;
            async move { any }
        });
        if !exported.await {
            let why = format!("{}: the collector received no export", variant.key);
            checked.violations.push(why);
        }
    }
    if let Some(on) = variant.events {
        checked
            .violations
            .extend(events_published(child.addr, variant.key, on).await);
    }
    let ok = out.gate(checked).await;
    child.stop().await?;
    stores.db.disconnect().await;
    ns.cleanup().await?;
    Ok(ok)
}
