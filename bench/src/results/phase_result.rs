//! What one phase measured, as the report, the JSON and the chart show it:
//! filled in by the phases, read by the renderers of [`crate::report`].

use std::collections::BTreeMap;

use serde::Serialize;

use super::{BatchSizes, DropSale, ExpiryStorm, HotSku, Stall};

/// The phases, in the order the table lists them; the key is the JSON name.
pub mod key {
    pub const CEILING: &str = "ceiling";
    /// The ceiling's reserve script fed through batch admission (many
    /// reservations per call), still without HTTP.
    pub const CEILING_BATCHED: &str = "ceiling_batched";
    pub const RESERVE_REDIS: &str = "reserve_redis";
    pub const RESERVE_QUEUE: &str = "reserve_queue";
    /// `reserve_redis` again with generous rate limits on (their cost, not their effect).
    pub const RESERVE_REDIS_LIMITED: &str = "reserve_redis_limited";
    /// `reserve_redis` again while a console polls `/v1/admin/overview` every second.
    pub const RESERVE_REDIS_CONSOLE: &str = "reserve_redis_console";
    /// `reserve_redis` again, unchanged, in a child started right before the
    /// secured one: the "off" side of its ratio, measured next to it.
    pub const RESERVE_REDIS_CONTROL: &str = "reserve_redis_control";
    /// `reserve_redis` again with TLS on the listener and a client token required.
    pub const RESERVE_REDIS_SECURED: &str = "reserve_redis_secured";
    /// `reserve_redis` again, unchanged, right after the secured child: with
    /// the control before it, brackets it (a drift over the run cancels).
    pub const RESERVE_REDIS_CONTROL_AFTER: &str = "reserve_redis_control_after";
    /// `reserve_queue` again with spans exported over OTLP at a 1 % sample.
    pub const RESERVE_QUEUE_TRACED: &str = "reserve_queue_traced";
    /// `reserve_queue` again with every trace sampled and exported.
    pub const RESERVE_QUEUE_TRACED_ALL: &str = "reserve_queue_traced_all";
    /// `reserve_queue` again with events off (`events.enabled: false`), in a
    /// child right before the events-on one.
    pub const RESERVE_QUEUE_EVENTS_OFF: &str = "reserve_queue_events_off";
    /// `reserve_queue` again with events on (the default), between two
    /// children with events off: the cost of telling the platform.
    pub const RESERVE_QUEUE_EVENTS_ON: &str = "reserve_queue_events_on";
    /// `reserve_queue` again with events off, right after the events-on child.
    pub const RESERVE_QUEUE_EVENTS_OFF_AFTER: &str = "reserve_queue_events_off_after";
    /// `--target`: the running stockd's durability is whatever it was started with.
    pub const RESERVE_TARGET: &str = "reserve_target";
    pub const SOLD_OUT: &str = "sold_out";
    /// `reserve_queue`'s load from 1,000 connections (the busy sale's fan-in).
    pub const RESERVE_FAN_IN: &str = "reserve_fan_in";
    /// `POST /v1/orders` of 3 lines (the same 3 SKUs) in the `reserve_queue`
    /// child, right after it: the CPU of a whole order next to one reservation.
    pub const ORDERS: &str = "orders";
    /// Reservations and 3-line orders in alternating rounds of one child,
    /// each round's CPU counted until MySQL applied it: the orders goal's
    /// measurement (`phases::orders_interleaved`).
    pub const RESERVE_INTERLEAVED: &str = "reserve_interleaved";
    pub const ORDERS_INTERLEAVED: &str = "orders_interleaved";
    pub const HALF_LOAD: &str = "reserve_half_load";
    pub const PERSIST_LAG: &str = "persist_lag";
    pub const HALF_LOAD_REDIS: &str = "reserve_half_load_redis";
    pub const PERSIST_LAG_REDIS: &str = "persist_lag_redis";
    pub const STRAWMAN: &str = "strawman";
    pub const STRAWMAN_1000: &str = "strawman_1000";
    /// One deep-stock SKU on a Redis Cluster, one bucket (today's layout).
    pub const HOT_SKU_1: &str = "hot_sku_1";
    /// The same load on a SKU split into three buckets on three primaries.
    pub const HOT_SKU_3: &str = "hot_sku_3";
    pub const CONSUMER_BATCHED: &str = "consumer_batched";
    pub const CONSUMER_PER_MESSAGE: &str = "consumer_per_message";
    /// The burst of the expiry storm: reservations at full speed in a child
    /// whose `reservation.ttl_secs` is short.
    pub const EXPIRY_STORM_BURST: &str = "expiry_storm_burst";
    /// The storm's release: releases per second, the lag from each due time.
    pub const EXPIRY_STORM: &str = "expiry_storm";
    /// A drop: the crowd waits for the opening at T, passes required, the
    /// hold budget on; holds per second from T to sold out.
    pub const DROP: &str = "drop";
}

/// What one phase measured.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub key: &'static str,
    /// One line saying what was measured.
    pub title: String,
    /// Unit of `throughput`: `req/s`, `tx/s`, `deductions/s`, `orders/s`.
    pub unit: &'static str,
    /// Concurrent requesters (0 when not applicable).
    pub concurrency: usize,
    /// Events measured (requests, transactions, deductions).
    pub count: u64,
    pub elapsed_ms: f64,
    pub throughput: f64,
    /// Latency (or, for persist lag, the lag) percentiles in ms.
    pub latency: Option<LatencyMs>,
    /// Answers by label (`201`, `409 SOLD_OUT`, ...).
    pub outcomes: BTreeMap<String, u64>,
    /// CPU milliseconds per process group during the phase.
    pub cpu_ms: BTreeMap<String, f64>,
    /// CPU milliseconds of each redis-server (by address): the primaries of a
    /// cluster one by one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redis_servers_ms: BTreeMap<String, f64>,
    /// When the phase started (Unix ms), to find what happened during it.
    pub started_unix_ms: u64,
    /// Redis commands on the bench's keys that blocked Redis during the phase
    /// (from SLOWLOG), slowest first.
    pub redis_stalls: Vec<Stall>,
    /// Group-commit batch sizes during the measured run (HTTP phases).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batches: Option<BatchSizes>,
    /// The hot-SKU phase's split, per-primary CPU and round trips.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hot_sku: Option<HotSku>,
    /// The expiry storm's rates, lags and release paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiry_storm: Option<ExpiryStorm>,
    /// The drop's windows: before T, the first second, sold out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop: Option<DropSale>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct LatencyMs {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl PhaseResult {
    /// CPU microseconds per counted event, by process group.
    pub fn cpu_us_per_event(&self) -> BTreeMap<String, f64> {
        let n = self.count.max(1) as f64;
        self.cpu_ms
            .iter()
            .map(|(k, ms)| (k.clone(), ms * 1000.0 / n))
            .collect()
    }
}
