//! Reads of the truth, straight from the private servers: SKU rows and the
//! ledger in MySQL; SKU hashes, reservation records, buyer counters and
//! outboxes in Redis; queue depths in RabbitMQ. On a Redis Cluster the reads go
//! through stockd's cluster client (it only routes each key to its slot's
//! primary), and every pipeline holds the keys of one SKU (one slot): a
//! cluster node refuses keys of several slots in one request (CROSSSLOT).

use std::collections::BTreeMap;

use deadpool_redis::redis;
use mysql_async::prelude::Queryable;

use crate::servers::mariadb::timed as sql;
use crate::servers::redis::timed as cmd;
use crate::stack::Stack;

/// Live ledger states: the unit is held by the buyer.
pub const LIVE: [&str; 2] = ["RESERVED", "CONFIRMED"];

#[derive(Debug, Clone)]
pub struct SkuRow {
    pub sku: u64,
    pub total: i64,
    pub available: i64,
    pub limit: i64,
}

#[derive(Debug, Clone)]
pub struct LedgerRow {
    pub sku: u64,
    pub rid: String,
    pub user: u64,
    pub count: i64,
    pub status: String,
    pub reason: Option<String>,
    pub expires_at_ms: u64,
    pub redis_pending: bool,
}

impl LedgerRow {
    pub fn live(&self) -> bool {
        LIVE.contains(&self.status.as_str())
    }
}

pub async fn sku_rows(stack: &Stack) -> Vec<SkuRow> {
    let mut db = stack.db().await;
    let rows: Vec<(u64, i64, i64, i64)> = sql(db.query(
        "SELECT sku_id, total_stock, available_stock, CAST(limit_per_user AS SIGNED)
         FROM sku_stock ORDER BY sku_id",
    ))
    .await;
    let _ = db.disconnect().await;
    rows.into_iter()
        .map(|(sku, total, available, limit)| SkuRow {
            sku,
            total,
            available,
            limit,
        })
        .collect()
}

pub async fn ledger(stack: &Stack) -> Vec<LedgerRow> {
    let mut db = stack.db().await;
    type Row = (u64, String, u64, i64, String, Option<String>, u64, i8);
    let rows: Vec<Row> = sql(db.query(
        "SELECT sku_id, deduct_request_id, user_id, CAST(deduct_count AS SIGNED), status,
                reason, expires_at_ms, redis_pending
         FROM stock_deduct_idempotent",
    ))
    .await;
    let _ = db.disconnect().await;
    rows.into_iter()
        .map(
            |(sku, rid, user, count, status, reason, expires_at_ms, pending)| LedgerRow {
                sku,
                rid,
                user,
                count,
                status,
                reason,
                expires_at_ms,
                redis_pending: pending != 0,
            },
        )
        .collect()
}

/// Ledger rows by (sku, request id).
pub fn by_key(rows: &[LedgerRow]) -> BTreeMap<(u64, String), &LedgerRow> {
    rows.iter().map(|r| ((r.sku, r.rid.clone()), r)).collect()
}

/// Redis `available` of a SKU (None: not loaded).
pub async fn redis_available(stack: &Stack, sku: u64) -> Option<i64> {
    let mut conn = stack.redis_link().await;
    let key = stack.keys.sku(sku_id(sku));
    let value: Option<i64> = cmd(redis::cmd("HGET")
        .arg(&key)
        .arg("available")
        .query_async(&mut conn))
    .await;
    value
}

pub async fn outbox_len(stack: &Stack, sku: u64) -> u64 {
    let mut conn = stack.redis_link().await;
    cmd(redis::cmd("XLEN")
        .arg(stack.keys.outbox(sku_id(sku)))
        .query_async(&mut conn))
    .await
}

/// Status of the Redis reservation record of each (sku, request id) asked
/// (None: no record), one pipelined round trip per 500.
pub async fn record_statuses(
    stack: &Stack,
    ids: &[(u64, String)],
) -> BTreeMap<(u64, String), Option<String>> {
    let mut conn = stack.redis_link().await;
    let mut out = BTreeMap::new();
    for chunk in per_sku_chunks(ids, |id| id.0) {
        let mut pipe = redis::pipe();
        for (sku, rid) in &chunk {
            let key = format!("{}{rid}", stack.keys.reservation_prefix(sku_id(*sku)));
            pipe.cmd("HGET").arg(key).arg("status");
        }
        let statuses: Vec<Option<String>> = cmd(pipe.query_async(&mut conn)).await;
        for (id, status) in chunk.iter().zip(statuses) {
            out.insert(id.clone(), status);
        }
    }
    out
}

/// `ids` in runs of at most 500 with one SKU each (one slot on a cluster).
fn per_sku_chunks<T: Clone>(ids: &[T], sku: impl Fn(&T) -> u64) -> Vec<Vec<T>> {
    let mut by_sku: BTreeMap<u64, Vec<T>> = BTreeMap::new();
    for id in ids {
        by_sku.entry(sku(id)).or_default().push(id.clone());
    }
    by_sku
        .into_values()
        .flat_map(|v| v.chunks(500).map(<[T]>::to_vec).collect::<Vec<_>>())
        .collect()
}

/// Redis buyer counters (missing = 0) of each (sku, user) asked.
pub async fn user_counters(stack: &Stack, ids: &[(u64, u64)]) -> BTreeMap<(u64, u64), i64> {
    let mut conn = stack.redis_link().await;
    let mut out = BTreeMap::new();
    for chunk in per_sku_chunks(ids, |id| id.0) {
        let mut pipe = redis::pipe();
        for (sku, user) in &chunk {
            let key = stack
                .keys
                .user(sku_id(*sku), stockd::domain::UserId::new(*user).unwrap());
            pipe.cmd("HGET").arg(key).arg("n");
        }
        let values: Vec<Option<i64>> = cmd(pipe.query_async(&mut conn)).await;
        for (id, value) in chunk.iter().zip(values) {
            out.insert(*id, value.unwrap_or(0));
        }
    }
    out
}

/// Request ids in a SKU's winners set (took Redis stock at some point).
pub async fn winners(stack: &Stack, sku: u64) -> Vec<String> {
    let mut conn = stack.redis_link().await;
    cmd(redis::cmd("SMEMBERS")
        .arg(stack.keys.winners(sku_id(sku)))
        .query_async(&mut conn))
    .await
}

/// Redis `TIME` in ms (the clock reservations expire by).
pub async fn redis_now_ms(stack: &Stack) -> u64 {
    let mut conn = stack.redis_link().await;
    let (secs, micros): (u64, u64) = cmd(redis::cmd("TIME").query_async(&mut conn)).await;
    secs * 1000 + micros / 1000
}

/// Work queues that must be empty once the pipeline drained (the expiry delay
/// queue holds a copy of every reservation until its TTL by design).
pub fn work_queues(stack: &Stack) -> Vec<String> {
    let t = &stack.topology;
    vec![
        t.deduct_queue.clone(),
        t.deduct_retry_queue.clone(),
        t.expiry_queue.clone(),
    ]
}

pub fn dead_letter_queues(stack: &Stack) -> Vec<String> {
    vec![
        stack.topology.deduct_dlq.clone(),
        stack.topology.expiry_dlq.clone(),
    ]
}

/// Ready messages per queue (passive declare; None when the broker does not answer).
pub async fn ready_counts(stack: &Stack, queues: &[String]) -> Vec<(String, Option<u32>)> {
    let mut out = Vec::new();
    for q in queues {
        out.push((q.clone(), stack.rabbit.ready(q).await));
    }
    out
}

pub fn sku_id(sku: u64) -> stockd::domain::SkuId {
    stockd::domain::SkuId::new(sku).expect("valid sku id")
}

/// Ledger status of one (sku, request id); None when MySQL has no row.
pub async fn ledger_status(stack: &Stack, sku: u64, rid: &str) -> Option<String> {
    let mut db = stack.db().await;
    let status: Option<String> = sql(db.exec_first(
        "SELECT status FROM stock_deduct_idempotent WHERE sku_id = ? AND deduct_request_id = ?",
        (sku, rid),
    ))
    .await;
    let _ = db.disconnect().await;
    status
}

/// Ledger rows in MySQL (all statuses).
pub async fn ledger_len(stack: &Stack) -> u64 {
    let mut db = stack.db().await;
    let n: Option<u64> = sql(db.query_first("SELECT COUNT(*) FROM stock_deduct_idempotent")).await;
    let _ = db.disconnect().await;
    n.unwrap_or(0)
}
