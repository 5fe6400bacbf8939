//! One observation of a SKU across both stores, and what in-flight work explains.
//!
//! Order of reads: a MySQL consistent snapshot starts first (t1), then one
//! atomic Redis snapshot (t2), then the ledger statuses of Redis' winning
//! request ids are read inside the t1 snapshot. Deductions reach Redis before
//! MySQL and releases reach MySQL before Redis, so every change that lands
//! between t1 and t2 is seen as a (MySQL status, Redis status) pair below and
//! counted as in flight — never as drift.
//!
//! When the SKU has too many winners to list, the figures are an estimate and
//! the pairs above cannot be formed. A release landing between t1 and t2 then
//! lifts Redis above the MySQL snapshot without any fault. So Redis' `available`
//! is also read once before t1 (t0); Redis is judged by the lower of the two
//! readings (see [`estimated_in_flight`]). A real loss of deductions keeps both
//! readings high; a release in the window lifts only the later one.

use std::collections::HashMap;

use crate::db::ledger::snapshot::{ledger_statuses, snapshot_opts};
use crate::db::{ledger, sku, Db, DbError};
use crate::domain::{ReservationStatus, SkuId};
use crate::redis::{RedisError, RedisSnapshot, RedisStore, WinnerRecord};

#[derive(Debug, Clone)]
pub struct Observation {
    pub sku_id: SkuId,
    pub total_stock: i64,
    pub mysql_available: i64,
    /// The SKU's last movement of stock `mysql_available` counts (0: none;
    /// warm-up records it so later Redis steps for it move nothing).
    pub moved_through: u64,
    /// Live (RESERVED + CONFIRMED) units in the ledger.
    pub ledger_units: i64,
    pub redis: Option<RedisSnapshot>,
    /// Units MySQL has available that Redis does not, explained by work in
    /// flight between the stores (negative: Redis legitimately above MySQL).
    pub in_flight: i64,
    /// Units of reservations Redis took that MySQL has not applied yet.
    pub unapplied: i64,
    /// Those reservations one by one, with their age (empty when not `exact`).
    pub unapplied_records: Vec<Unapplied>,
    /// False when the in-flight figure is an estimate (too many winners).
    pub exact: bool,
    /// Live ledger rows Redis should still hold but has no record of: Redis
    /// lost acknowledged writes (replays and limits would break). 0 when it
    /// cannot be told (not loaded, too many winners).
    pub missing_in_redis: i64,
    /// Buyers holding more live units than `limit_per_user` in MySQL.
    pub buyers_over_limit: i64,
    /// Reservations MySQL holds as RESERVED (or, released, not at all) whose
    /// Redis mirror already shows a final state (empty when not `exact`). The mirror is written only after
    /// MySQL committed that state, so each one is a decision MySQL has since
    /// lost (a failover to a lagging replica) — or one committed between the
    /// two reads, which re-applying finds already done.
    pub decided_in_redis_only: Vec<RedisDecided>,
}

/// A final state Redis mirrors that the MySQL row lacks (see
/// [`Observation::decided_in_redis_only`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisDecided {
    pub request_id: String,
    /// CONFIRMED or RELEASED.
    pub status: ReservationStatus,
}

/// A reservation Redis took (RESERVED/CONFIRMED) that the ledger lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unapplied {
    pub request_id: String,
    pub count: i64,
    /// Admission time, Redis clock.
    pub created_ms: u64,
    /// RESERVED, or CONFIRMED when the payment was decided (and then lost by
    /// MySQL: a confirm is mirrored only after its commit).
    pub status: ReservationStatus,
}

#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
    #[error("SKU {0} does not exist in MySQL")]
    UnknownSku(SkuId),
    /// A repair's re-publish of lost deductions failed (broker down).
    #[error("re-publish of lost deductions: {0}")]
    Republish(String),
}

impl From<crate::ops::lifecycle::LifecycleError> for ObserveError {
    fn from(err: crate::ops::lifecycle::LifecycleError) -> Self {
        use crate::ops::lifecycle::LifecycleError;
        match err {
            LifecycleError::Db(e) => Self::Db(e),
            LifecycleError::Redis(e) => Self::Redis(e),
        }
    }
}

/// Units a (MySQL status, Redis status) pair puts between MySQL's and Redis'
/// available counts (positive: MySQL above Redis).
pub fn contribution(
    mysql: Option<ReservationStatus>,
    redis: Option<ReservationStatus>,
    count: i64,
) -> i64 {
    use ReservationStatus::*;
    match (mysql, redis) {
        // Redis took it, MySQL has not applied it (yet, in this snapshot).
        (None, Some(Reserved | Confirmed)) => count,
        // MySQL released it, Redis has not returned it yet.
        (Some(Released), Some(Reserved)) => count,
        // Released and mirrored after the MySQL snapshot began.
        (Some(Reserved | Confirmed), Some(Released)) => -count,
        _ => 0,
    }
}

/// One observation, bounded by `mysql.query_timeout_ms` like every MySQL operation.
pub async fn observe(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    max_winners: usize,
) -> Result<Observation, ObserveError> {
    tokio::time::timeout(
        db.operation_bound(),
        observe_unbounded(db, redis, sku_id, max_winners),
    )
    .await
    .map_err(|_| ObserveError::Db(DbError::QueryTimeout))?
}

async fn observe_unbounded(
    db: &Db,
    redis: &RedisStore,
    sku_id: SkuId,
    max_winners: usize,
) -> Result<Observation, ObserveError> {
    let mut conn = db.conn().await?;
    let available_before = redis.skus().sku(sku_id).await?.map(|s| s.available);
    let mut tx = conn
        .start_transaction(snapshot_opts())
        .await
        .map_err(DbError::from)?;
    let row = sku::get(&mut tx, sku_id)
        .await?
        .ok_or(ObserveError::UnknownSku(sku_id))?;
    let ledger_units = ledger::live_units(&mut tx, sku_id).await?;
    let moved_through = crate::db::movement_steps::moved_through(&mut tx, sku_id).await?;
    let buyers_over_limit = ledger::buyers_over_limit(&mut tx, sku_id, row.limit_per_user)
        .await?
        .len() as i64;
    let snapshot = redis.drift().snapshot(sku_id, max_winners).await?;
    let explained = match snapshot.as_ref().and_then(|s| s.winners.as_ref()) {
        Some(winners) => {
            let ids: Vec<&str> = winners.iter().map(|w| w.request_id.as_str()).collect();
            let statuses = ledger_statuses(&mut tx, sku_id, &ids).await?;
            let since_ms = recent_since_ms(redis).await?;
            let live = ledger::live_ids_since(&mut tx, sku_id, since_ms, max_winners + 1).await?;
            let mut explained = pair_winners(winners, &statuses);
            explained.missing_in_redis = count_missing(&live, winners, max_winners);
            explained
        }
        None => estimate(row.available_stock, available_before, snapshot.as_ref()),
    };
    tx.commit().await.map_err(DbError::from)?;
    Ok(Observation {
        sku_id,
        total_stock: row.total_stock,
        mysql_available: row.available_stock,
        moved_through,
        ledger_units,
        redis: snapshot,
        in_flight: explained.in_flight,
        unapplied: explained.unapplied,
        unapplied_records: explained.unapplied_records,
        exact: explained.exact,
        missing_in_redis: explained.missing_in_redis,
        buyers_over_limit,
        decided_in_redis_only: explained.decided_in_redis_only,
    })
}

/// What in-flight work explains of the gap between the stores (the fields of
/// [`Observation`] of the same names).
struct Explained {
    in_flight: i64,
    unapplied: i64,
    unapplied_records: Vec<Unapplied>,
    exact: bool,
    missing_in_redis: i64,
    decided_in_redis_only: Vec<RedisDecided>,
}

/// The exact figures: each Redis winner paired with its ledger status
/// (`missing_in_redis` is left 0 for the caller).
fn pair_winners(
    winners: &[WinnerRecord],
    statuses: &HashMap<String, ReservationStatus>,
) -> Explained {
    use ReservationStatus::{Confirmed, Released, Reserved};
    let mut explained = Explained {
        in_flight: 0,
        unapplied: 0,
        unapplied_records: Vec::new(),
        exact: true,
        missing_in_redis: 0,
        decided_in_redis_only: Vec::new(),
    };
    for w in winners {
        let mysql = statuses.get(&w.request_id).copied();
        let c = contribution(mysql, w.status, w.count);
        explained.in_flight += c;
        match (mysql, w.status) {
            (None, Some(status)) if c > 0 => {
                explained.unapplied += c;
                explained.unapplied_records.push(Unapplied {
                    request_id: w.request_id.clone(),
                    count: w.count,
                    created_ms: w.created_ms,
                    status,
                });
            }
            (Some(Reserved), Some(status @ (Confirmed | Released)))
            | (None, Some(status @ Released)) => {
                explained.decided_in_redis_only.push(RedisDecided {
                    request_id: w.request_id.clone(),
                    status,
                })
            }
            _ => {}
        }
    }
    explained
}

/// The estimate when the winners cannot be listed: whatever separates the
/// stores, if Redis is below (nothing when the SKU is not loaded in Redis).
fn estimate(
    mysql_available: i64,
    available_before: Option<i64>,
    snapshot: Option<&RedisSnapshot>,
) -> Explained {
    let in_flight = snapshot.map_or(0, |s| {
        estimated_in_flight(mysql_available, available_before, s.available)
    });
    Explained {
        in_flight,
        unapplied: in_flight.max(0),
        unapplied_records: Vec::new(),
        exact: false,
        missing_in_redis: 0,
        decided_in_redis_only: Vec::new(),
    }
}

/// In-flight units when the winners cannot be listed: whatever separates
/// MySQL (`mysql`, at t1) from Redis (`after`, at t2), where Redis counts at the
/// lower of its readings before t1 and at t2. So the drift (`after - mysql +
/// in_flight`) is `max(min(before, after) - mysql, 0)`: only Redis above MySQL at
/// both readings is drift; Redis below MySQL is in flight.
fn estimated_in_flight(mysql: i64, before: Option<i64>, after: i64) -> i64 {
    let floor = before.map_or(after, |b| b.min(after));
    mysql.max(floor) - after
}

/// Rows a record of which Redis should hold for at least this long more are
/// compared; younger-than-retention rows only, with a margin for clock skew.
const MISSING_MARGIN_MS: u64 = 60_000;

/// Rows reserved after this time must still have their record in Redis.
async fn recent_since_ms(redis: &RedisStore) -> Result<u64, ObserveError> {
    let now_ms = redis.now_ms().await?;
    Ok(now_ms.saturating_sub(redis.reservations().record_lifetime_ms()) + MISSING_MARGIN_MS)
}

/// Of `live` (ledger rows recent enough that Redis must still hold their
/// record), those whose record Redis does not have (0 when there are too many
/// to list).
fn count_missing(live: &[String], winners: &[WinnerRecord], max_rows: usize) -> i64 {
    if live.len() > max_rows {
        return 0;
    }
    let held: std::collections::HashSet<&str> = winners
        .iter()
        .filter(|w| w.status.is_some())
        .map(|w| w.request_id.as_str())
        .collect();
    live.iter().filter(|id| !held.contains(id.as_str())).count() as i64
}

#[cfg(test)]
mod tests {
    use super::{contribution, estimated_in_flight};
    use crate::domain::ReservationStatus::*;

    /// Drift as `classify` computes it from the estimate.
    fn estimated_drift(mysql: i64, before: Option<i64>, after: i64) -> i64 {
        after - (mysql - estimated_in_flight(mysql, before, after))
    }

    #[test]
    fn an_estimate_blames_redis_only_when_both_readings_are_above_mysql() {
        // Quiet: Redis below MySQL by what is in flight.
        assert_eq!(estimated_drift(100, Some(90), 90), 0);
        assert_eq!(estimated_in_flight(100, Some(90), 90), 10);
        // A release returned to MySQL after t1 and to Redis before t2.
        assert_eq!(estimated_drift(100, Some(100), 101), 0);
        // Lost deductions: Redis above MySQL before and after.
        assert_eq!(estimated_drift(100, Some(103), 103), 3);
        assert_eq!(estimated_drift(100, Some(104), 103), 3);
        // No reading before (SKU not loaded then): the one reading decides.
        assert_eq!(estimated_drift(100, None, 102), 2);
    }

    #[test]
    fn in_flight_pairs_explain_the_gap_and_settled_pairs_do_not() {
        assert_eq!(contribution(None, Some(Reserved), 2), 2);
        assert_eq!(contribution(Some(Released), Some(Reserved), 2), 2);
        assert_eq!(contribution(Some(Reserved), Some(Released), 2), -2);
        assert_eq!(contribution(Some(Reserved), Some(Reserved), 2), 0);
        assert_eq!(contribution(Some(Released), Some(Released), 2), 0);
        assert_eq!(contribution(Some(Rejected), Some(Reserved), 2), 0);
        assert_eq!(contribution(Some(Confirmed), Some(Reserved), 2), 0);
        assert_eq!(contribution(None, Some(Rejected), 2), 0);
    }
}
