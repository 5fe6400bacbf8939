//! The console's overview (`GET /v1/admin/overview`), described: mirrors of
//! `ops::overview`'s types and `db::console::StatusCounts` (why mirrors:
//! `mirrors/mod.rs`).

use utoipa::ToSchema;

/// The console's one document.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::overview::Overview`, which the route serializes
pub struct Overview {
    /// When it was gathered: ms since the Unix epoch, this host's clock.
    generated_at_ms: u64,
    /// The process that gathered it (`host:pid`).
    node: String,
    /// The first SKUs by id, at most 50.
    skus: Vec<SkuLine>,
    /// True when more SKUs exist than are listed.
    skus_truncated: bool,
    reservations: ReserveCounts,
    /// Orders by status in MySQL (whole orders; their lines are in the SKUs'
    /// counts); `null` when MySQL did not answer.
    #[schema(required = true)]
    orders: Option<StatusCounts>,
    pipeline: Pipeline,
    /// The reconciler's latest report in this process; `null` before its first check.
    #[schema(required = true)]
    reconcile: Option<ReconcileSummary>,
    health: Health,
    /// stockd processes heard from in the last 20 s (heartbeats in Redis).
    nodes: Vec<NodeSeen>,
}

/// One SKU as both stores see it.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::overview::SkuLine`, which the route serializes
pub struct SkuLine {
    #[schema(minimum = 1)]
    sku_id: u64,
    total_stock: i64,
    /// Units left in Redis (what buyers are admitted against); `null` when not
    /// loaded or Redis did not answer.
    #[schema(required = true)]
    redis_available: Option<i64>,
    /// Units left in the MySQL ledger.
    mysql_available: i64,
    /// Ledger rows (reservations, not units) by status.
    reserved: u64,
    confirmed: u64,
    released: u64,
    rejected: u64,
    /// Nothing left in Redis.
    sold_out: bool,
    limit_per_user: u64,
    /// The sale window's opening (RFC 3339); `null`: none (docs/contract.md
    /// §19).
    #[schema(required = true)]
    sale_opens_at: Option<String>,
    /// The sale window's close (RFC 3339); `null`: none.
    #[schema(required = true)]
    sale_closes_at: Option<String>,
    /// A hold of this SKU must carry a pass.
    requires_pass: bool,
}

/// Reservation attempts answered by this process since it started, by result.
/// The page turns successive readings into rates.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::overview::metrics::ReserveCounts`, which the route serializes
pub struct ReserveCounts {
    /// Reserved (201/202).
    accepted: u64,
    /// Identical replays of an earlier reservation (200).
    replayed: u64,
    /// Sold out or fewer units left than asked for (409).
    sold_out: u64,
    /// The buyer's per-SKU limit (409 LIMIT_EXCEEDED).
    limit: u64,
    /// The buyer's attempt rate (429 from the reserve script).
    rate_limited: u64,
    /// Everything else: Redis errors, a full outbox, SKU not loaded or unknown,
    /// idempotency mismatches.
    errors: u64,
}

/// Rows by status: a SKU's ledger rows (reservations, not units), or the
/// orders (whole orders, not lines).
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `db::console::StatusCounts`, which the route serializes
pub struct StatusCounts {
    reserved: u64,
    confirmed: u64,
    released: u64,
    rejected: u64,
}

/// The way from Redis to the MySQL ledger.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::overview::Pipeline`, which the route serializes
pub struct Pipeline {
    /// Outbox entries not yet confirmed by the broker, all SKUs.
    outbox_entries: u64,
    /// Age of the oldest outbox entry (0 when empty).
    outbox_oldest_age_ms: u64,
    /// Deductions ready in the work queue; `null` when the broker did not answer.
    #[schema(required = true)]
    queue_depth: Option<u64>,
    /// Deductions waiting for a retry.
    #[schema(required = true)]
    retry_depth: Option<u64>,
    /// Messages dead-lettered (deduct and expiry DLQs).
    #[schema(required = true)]
    dlq_count: Option<u64>,
    /// Consumers attached to the work queue.
    #[schema(required = true)]
    consumers: Option<u64>,
    /// p99 of reservation-to-ledger lag over the last 15 s (bucket bound, ms),
    /// as measured by a consumer in this process; `null` when none ran.
    #[schema(required = true)]
    persist_lag_p99_ms: Option<f64>,
    /// Mean consumer batch size over the last 15 s (consumer in this process).
    #[schema(required = true)]
    consumer_batch_size: Option<f64>,
}

/// The reconciler's latest verdicts.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::overview::ReconcileSummary`, which the route serializes
pub struct ReconcileSummary {
    #[schema(format = DateTime)]
    checked_at: String,
    /// The first 50 SKUs of the report.
    skus: Vec<ReconcileLine>,
}

#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::overview::ReconcileLine`, which the route serializes
pub struct ReconcileLine {
    #[schema(minimum = 1)]
    sku_id: u64,
    /// `OK`, `IN_FLIGHT`, `REDIS_AHEAD`, `REDIS_BEHIND`, `MYSQL_INCONSISTENT`, `STUCK` or
    /// `MYSQL_BEHIND`.
    verdict: String,
    /// Redis `available` minus what it should hold.
    drift: i64,
}

/// Whether each dependency answered this gather.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::overview::Health`, which the route serializes
pub struct Health {
    redis: bool,
    mysql: bool,
    broker: bool,
    /// The workers' MySQL circuit breaker is open (consumer and closer paused).
    mysql_breaker_open: bool,
}

/// A process that wrote a heartbeat recently.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::overview::nodes::NodeSeen`, which the route serializes
pub struct NodeSeen {
    /// `host:pid`.
    name: String,
    /// Milliseconds since its last heartbeat (Redis' clock).
    age_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::super::keys_of;
    use crate::db::console::StatusCounts as RealCounts;
    use crate::ops::overview as real;

    #[test]
    fn the_overview_mirrors_match_what_is_served() {
        let overview = real::Overview {
            generated_at_ms: 1,
            node: "host:1".into(),
            skus: vec![real::SkuLine {
                sku_id: 1,
                total_stock: 10,
                redis_available: None,
                mysql_available: 10,
                reserved: 0,
                confirmed: 0,
                released: 0,
                rejected: 0,
                sold_out: false,
                limit_per_user: 1,
                sale_opens_at: None,
                sale_closes_at: None,
                requires_pass: false,
            }],
            skus_truncated: false,
            reservations: Default::default(),
            orders: Some(RealCounts::default()),
            pipeline: Default::default(),
            reconcile: Some(real::ReconcileSummary {
                checked_at: "1970-01-01T00:00:00Z".into(),
                skus: vec![real::ReconcileLine {
                    sku_id: 1,
                    verdict: "OK".into(),
                    drift: 0,
                }],
            }),
            health: Default::default(),
            nodes: vec![real::nodes::NodeSeen {
                name: "host:1".into(),
                age_ms: 0,
            }],
        };
        let shown = serde_json::to_value(&overview).unwrap();
        let pairs = [
            keys_of::<super::Overview>(&shown),
            keys_of::<super::SkuLine>(&shown["skus"][0]),
            keys_of::<super::ReserveCounts>(&shown["reservations"]),
            keys_of::<super::StatusCounts>(&shown["orders"]),
            keys_of::<super::Pipeline>(&shown["pipeline"]),
            keys_of::<super::ReconcileSummary>(&shown["reconcile"]),
            keys_of::<super::ReconcileLine>(&shown["reconcile"]["skus"][0]),
            keys_of::<super::Health>(&shown["health"]),
            keys_of::<super::NodeSeen>(&shown["nodes"][0]),
        ];
        for (described, served) in pairs {
            assert_eq!(described, served);
        }
    }
}
