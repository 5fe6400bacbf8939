//! The invariant check's per-record comparisons of Redis with MySQL (invariants 3, 4, 6):
//! every live ledger row against its Redis record, every Redis winner against
//! the ledger, every buyer's counter, and the outbox. (The SKU-level
//! `redis_loaded` and `stores_agree` are the one comparison of the stores:
//! `stores.rs`.) These ask which rows, records and counters disagree, by
//! name, over every row of the SKU — more than one script may list — so they
//! page instead of taking the comparison's one snapshot.
//!
//! Order of reads: ledger pages come from a MySQL snapshot taken first, Redis
//! is read after. A row released (or a reservation applied) in between would
//! look like a mismatch, so every candidate gets a second look at both stores
//! as they are now before it counts. Redis records and buyer counters expire
//! `reservation.ttl_secs + redis.reservation_retention_secs` after their last
//! write; ledger rows older than that are not expected in Redis any more.

use std::collections::HashSet;

use super::{Checks, InvariantCheckError};
use super::{LEDGER_IN_REDIS, OUTBOX_EMPTY, REDIS_BUYER_COUNTERS, REDIS_IN_LEDGER};
use crate::db::invariants::{self as reads, BuyerUnits, LiveRow};
use crate::db::ledger::snapshot::ledger_statuses;
use crate::db::DbError;
use crate::domain::{RequestId, SkuId, UserId};
use crate::redis::inspect::RecordView;
use crate::resources::Resources;

/// Ledger rows (or buyers) read per page, and Redis lookups per pipeline.
const PAGE_ROWS: usize = 500;
/// `SSCAN` hint per step over the winners set: small steps keep Redis free.
const SCAN_COUNT: usize = 500;

pub(super) async fn check_sku(
    res: &Resources,
    sku: SkuId,
    now_ms: u64,
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let outbox = res.redis.outbox().len(sku).await?;
    if outbox > 0 {
        checks.add(OUTBOX_EMPTY, outbox, || {
            format!("sku {sku}: {outbox} outbox entries not confirmed by the broker")
        });
    }
    let retained_since_ms = now_ms.saturating_sub(retention_ms(res));
    ledger_in_redis(res, sku, retained_since_ms, checks).await?;
    redis_in_ledger(res, sku, checks).await?;
    buyer_counters(res, sku, retained_since_ms, checks).await
}

/// How long Redis keeps a record or counter after its last write.
fn retention_ms(res: &Resources) -> u64 {
    let s = &res.settings;
    (s.reservation.ttl_secs + s.redis.reservation_retention_secs) * 1000
}

/// What is wrong with a live ledger row's Redis side, if anything.
fn redis_problem(record: Option<&RecordView>, in_winners: bool) -> Option<String> {
    match record {
        None => Some("no Redis record".into()),
        Some(r) if !r.status.is_some_and(|s| s.is_live()) => Some(format!(
            "Redis record is {}",
            r.status.map_or("unreadable", |s| s.as_str())
        )),
        Some(_) if !in_winners => Some("not in the Redis winners set".into()),
        Some(_) => None,
    }
}

/// Redis' view of `ids`: the record and winners membership of each.
async fn redis_view(
    res: &Resources,
    sku: SkuId,
    ids: &[RequestId],
) -> Result<Vec<(Option<RecordView>, bool)>, InvariantCheckError> {
    let records = res.redis.inspect().records(sku, ids).await?;
    let members = res.redis.inspect().winners_contain(sku, ids).await?;
    Ok(records.into_iter().zip(members).collect())
}

/// Every live ledger row has a live Redis record and is a winner; a row
/// missing from Redis means Redis lost acknowledged writes (a replay of that
/// request would be admitted again, the buyer's limit would not count it).
async fn ledger_in_redis(
    res: &Resources,
    sku: SkuId,
    retained_since_ms: u64,
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let mut conn = res.db.conn().await?;
    let mut tx = reads::begin_snapshot(&mut conn).await?;
    let mut after = String::new();
    loop {
        let page = reads::live_rows_page(&mut tx, sku, &after, PAGE_ROWS).await?;
        let Some(last) = page.last() else { break };
        after = last.request_id.clone();
        let rows: Vec<(&LiveRow, RequestId)> = page
            .iter()
            .filter(|r| r.reserved_at_ms >= retained_since_ms)
            .filter_map(|r| Some((r, RequestId::parse(&r.request_id).ok()?)))
            .collect();
        let ids: Vec<RequestId> = rows.iter().map(|(_, id)| id.clone()).collect();
        let view = redis_view(res, sku, &ids).await?;
        let suspects: Vec<usize> = (0..rows.len())
            .filter(|&i| redis_problem(view[i].0.as_ref(), view[i].1).is_some())
            .collect();
        if !suspects.is_empty() {
            let rows: Vec<_> = suspects.iter().map(|&i| rows[i].clone()).collect();
            confirm_ledger_rows(res, sku, &rows, checks).await?;
        }
        if page.len() < PAGE_ROWS {
            break;
        }
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(())
}

/// Second look at suspect rows: still live in MySQL and still wrong in Redis.
async fn confirm_ledger_rows(
    res: &Resources,
    sku: SkuId,
    rows: &[(&LiveRow, RequestId)],
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let ids: Vec<&str> = rows.iter().map(|(r, _)| r.request_id.as_str()).collect();
    let now = ledger_statuses(&mut res.db.conn().await?, sku, &ids).await?;
    let request_ids: Vec<RequestId> = rows.iter().map(|(_, id)| id.clone()).collect();
    let view = redis_view(res, sku, &request_ids).await?;
    for ((row, _), (record, member)) in rows.iter().zip(view) {
        let still_live = now.get(&row.request_id).is_some_and(|s| s.is_live());
        let Some(problem) = redis_problem(record.as_ref(), member).filter(|_| still_live) else {
            continue;
        };
        checks.one(LEDGER_IN_REDIS, || {
            format!(
                "sku {sku} request {} user {} count {} ({}): {problem}",
                row.request_id,
                row.user_id,
                row.count,
                row.status.as_str()
            )
        });
    }
    Ok(())
}

/// Every winner whose Redis record is live has a ledger row: a reservation
/// Redis accepted that MySQL never got is accepted-but-missing (invariant 4).
/// MySQL is read after Redis here, so anything applied meanwhile is found.
async fn redis_in_ledger(
    res: &Resources,
    sku: SkuId,
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let mut reported = HashSet::new();
    let mut cursor = 0;
    loop {
        let (next, members) = res
            .redis
            .inspect()
            .winners_page(sku, cursor, SCAN_COUNT)
            .await?;
        for chunk in members.chunks(PAGE_ROWS) {
            let ids: Vec<RequestId> = chunk
                .iter()
                .filter_map(|m| RequestId::parse(m).ok())
                .collect();
            let records = res.redis.inspect().records(sku, &ids).await?;
            let live: Vec<(&RequestId, RecordView)> = ids
                .iter()
                .zip(records)
                .filter_map(|(id, r)| Some((id, r?)))
                .filter(|(_, r)| r.status.is_some_and(|s| s.is_live()))
                .collect();
            let names: Vec<&str> = live.iter().map(|(id, _)| id.as_str()).collect();
            let in_ledger = ledger_statuses(&mut res.db.conn().await?, sku, &names).await?;
            for (id, record) in live {
                // SSCAN may return a member twice; report it once.
                if in_ledger.contains_key(id.as_str()) || !reported.insert(id.to_string()) {
                    continue;
                }
                checks.one(REDIS_IN_LEDGER, || accepted_but_missing(sku, id, &record));
            }
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

fn accepted_but_missing(sku: SkuId, id: &RequestId, r: &RecordView) -> String {
    let since = r
        .created_ms
        .filter(|ms| *ms > 0)
        .map_or("unknown time".to_string(), crate::clock::rfc3339_ms);
    format!(
        "sku {sku} request {id} user {} count {} ({} since {since}): accepted by Redis, no ledger row",
        r.user_id.map_or("?".into(), |u| u.to_string()),
        r.count.map_or("?".into(), |c| c.to_string()),
        r.status.map_or("?", |s| s.as_str()),
    )
}

/// Each buyer's Redis counter equals their live units. A counter LOWER than
/// MySQL's is the dangerous direction: Redis would let the buyer exceed
/// `limit_per_user` (MySQL then rejects the excess after the 201).
async fn buyer_counters(
    res: &Resources,
    sku: SkuId,
    retained_since_ms: u64,
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let mut conn = res.db.conn().await?;
    let mut tx = reads::begin_snapshot(&mut conn).await?;
    let mut after = 0;
    loop {
        let page = reads::buyers_page(&mut tx, sku, after, PAGE_ROWS).await?;
        let Some(last) = page.last() else { break };
        after = last.user_id;
        let buyers: Vec<&BuyerUnits> = page
            .iter()
            .filter(|b| b.last_reserved_ms >= retained_since_ms)
            .collect();
        let suspects = mismatched(res, sku, &buyers).await?;
        if !suspects.is_empty() {
            // Second look, both stores as they are now.
            let users: Vec<u64> = suspects.iter().map(|b| b.user_id).collect();
            let now = reads::live_units_of(&mut res.db.conn().await?, sku, &users).await?;
            let fresh: Vec<BuyerUnits> = suspects
                .iter()
                .map(|b| BuyerUnits {
                    units: now.get(&b.user_id).copied().unwrap_or(0),
                    ..(*b).clone()
                })
                .collect();
            let fresh: Vec<&BuyerUnits> = fresh.iter().collect();
            for (buyer, counter) in mismatched_counters(res, sku, &fresh).await? {
                checks.one(REDIS_BUYER_COUNTERS, || counter_detail(sku, buyer, counter));
            }
        }
        if page.len() < PAGE_ROWS {
            break;
        }
    }
    tx.commit().await.map_err(DbError::from)?;
    Ok(())
}

async fn mismatched<'a>(
    res: &Resources,
    sku: SkuId,
    buyers: &[&'a BuyerUnits],
) -> Result<Vec<&'a BuyerUnits>, InvariantCheckError> {
    Ok(mismatched_counters(res, sku, buyers)
        .await?
        .into_iter()
        .map(|(b, _)| b)
        .collect())
}

/// Buyers whose counter (missing = 0) differs from their live units.
async fn mismatched_counters<'a>(
    res: &Resources,
    sku: SkuId,
    buyers: &[&'a BuyerUnits],
) -> Result<Vec<(&'a BuyerUnits, i64)>, InvariantCheckError> {
    let users: Vec<UserId> = buyers
        .iter()
        .filter_map(|b| UserId::new(b.user_id).ok())
        .collect();
    if users.len() != buyers.len() {
        // A user id MySQL holds that is not a valid id: nothing in Redis can match.
        return Ok(buyers.iter().map(|b| (*b, 0)).collect());
    }
    let counters = res.redis.inspect().user_counters(sku, &users).await?;
    Ok(buyers
        .iter()
        .zip(counters)
        .map(|(b, c)| (*b, c.unwrap_or(0)))
        .filter(|(b, c)| *c != b.units)
        .collect())
}

fn counter_detail(sku: SkuId, buyer: &BuyerUnits, counter: i64) -> String {
    let (user, units) = (buyer.user_id, buyer.units);
    if counter < units {
        format!("sku {sku} user {user}: Redis counter {counter} < live units {units} (LOWER: Redis would let the buyer exceed limit_per_user)")
    } else {
        format!("sku {sku} user {user}: Redis counter {counter} > live units {units}")
    }
}
