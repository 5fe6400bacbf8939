//! The invariant check behind `stockd audit`: a read-only check of the
//! contract §10 invariants (contract §16 lists which) on a running deployment —
//! after a drill, an incident, or before a sale. The reconciler answers "is
//! Redis where it should be right now, given what is in flight?"; the invariant
//! check answers "was anything accepted lost, applied twice, oversold or
//! over-limit?", row by row, and is meant to run once the pipeline drained
//! (otherwise in-flight work shows up under `stores_agree`, `redis_in_ledger`,
//! `outbox_empty` and `queues_drained`).
//!
//! It writes nothing: MySQL is read in read-only consistent-snapshot
//! transactions, Redis with reads only (`SSCAN ... COUNT` for the winners set,
//! pipelined O(1) lookups, the comparison's snapshot script with the counters
//! only, never a long script), the broker with passive
//! declares and a non-destructive browse of the dead-letter queues (see
//! [`crate::mq::dlq`]). The SKU-level agreement of the stores is the one
//! comparison the reconciler reads too ([`crate::ops::compare`], `stores.rs`);
//! the per-record findings get a second look outside their snapshot, so a
//! change that landed between the two reads is not reported (`cross.rs`).
//!
//! The check names and the JSON shape of [`InvariantReport`] are an interface
//! (fault suites parse them): keep them.

mod broker;
mod cross;
mod mysql;
mod orders;
mod stores;

use serde::{Deserialize, Serialize};

use crate::db::DbError;
use crate::domain::SkuId;
use crate::mq::MqError;
use crate::redis::RedisError;
use crate::resources::Resources;

pub const MYSQL_NON_NEGATIVE: &str = "mysql_non_negative";
pub const MYSQL_CONSERVATION: &str = "mysql_conservation";
pub const BUYER_LIMIT: &str = "buyer_limit";
pub const REDIS_LOADED: &str = "redis_loaded";
pub const STORES_AGREE: &str = "stores_agree";
pub const LEDGER_IN_REDIS: &str = "ledger_in_redis";
pub const REDIS_IN_LEDGER: &str = "redis_in_ledger";
pub const REDIS_BUYER_COUNTERS: &str = "redis_buyer_counters";
pub const OUTBOX_EMPTY: &str = "outbox_empty";
pub const QUEUES_DRAINED: &str = "queues_drained";
pub const DLQ_EMPTY: &str = "dlq_empty";
pub const EXPIRED_RELEASED: &str = "expired_released";
pub const ORDERS_WHOLE: &str = "orders_whole";
pub const ORDER_LINES_IN_LEDGER: &str = "order_lines_in_ledger";
pub const ORDER_STATUS_MATCHES: &str = "order_status_matches";

/// Every check, in report order.
pub const CHECKS: [&str; 15] = [
    MYSQL_NON_NEGATIVE,
    MYSQL_CONSERVATION,
    BUYER_LIMIT,
    REDIS_LOADED,
    STORES_AGREE,
    LEDGER_IN_REDIS,
    REDIS_IN_LEDGER,
    REDIS_BUYER_COUNTERS,
    OUTBOX_EMPTY,
    QUEUES_DRAINED,
    DLQ_EMPTY,
    EXPIRED_RELEASED,
    ORDERS_WHOLE,
    ORDER_LINES_IN_LEDGER,
    ORDER_STATUS_MATCHES,
];

/// Details kept per check; the rest are summed up in one "… and N more" line.
pub const DETAILS_MAX: usize = 20;
/// Details shown per check in the human table.
const TABLE_DETAILS: usize = 3;

/// One check's outcome (JSON: `{"check","ok","violations","details"}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    pub check: String,
    pub ok: bool,
    pub violations: u64,
    pub details: Vec<String>,
}

/// `stockd audit --json`: `{"checked_at","ok","checks":[...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InvariantReport {
    /// RFC 3339, when the check started.
    pub checked_at: String,
    pub ok: bool,
    pub checks: Vec<CheckResult>,
}

impl InvariantReport {
    pub fn check(&self, name: &str) -> Option<&CheckResult> {
        self.checks.iter().find(|c| c.check == name)
    }

    /// Names of the checks that found violations.
    pub fn failed(&self) -> Vec<&str> {
        self.checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.check.as_str())
            .collect()
    }

    /// The human table: check, result, violations, the first few details.
    pub fn table(&self) -> String {
        let failed = self.failed().len();
        let mut out = format!(
            "audit at {}: {} ({} of {} checks failed)\n{:<22} {:<6} {:>10}  details\n",
            self.checked_at,
            if self.ok { "OK" } else { "FAIL" },
            failed,
            self.checks.len(),
            "check",
            "result",
            "violations"
        );
        for c in &self.checks {
            let result = if c.ok { "OK" } else { "FAIL" };
            let mut details = c.details.iter().take(TABLE_DETAILS);
            let first = details.next().map_or("", String::as_str);
            out += &format!(
                "{:<22} {:<6} {:>10}  {first}\n",
                c.check, result, c.violations
            );
            for more in details {
                out += &format!("{:<41}{more}\n", "");
            }
            if c.details.len() > TABLE_DETAILS {
                out += &format!("{:<41}(--json shows up to {DETAILS_MAX})\n", "");
            }
        }
        out
    }
}

/// A store could not be read: the check cannot judge (`stockd audit` exits 2).
#[derive(Debug, thiserror::Error)]
pub enum InvariantCheckError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Redis(#[from] RedisError),
    #[error(transparent)]
    Broker(#[from] MqError),
}

/// Violations of one check while the invariant check runs.
struct Check {
    name: &'static str,
    violations: u64,
    details: Vec<String>,
}

/// Every check's collector, in report order.
pub(crate) struct Checks(Vec<Check>);

impl Checks {
    fn new() -> Self {
        Self(
            CHECKS
                .iter()
                .map(|name| Check {
                    name,
                    violations: 0,
                    details: Vec::new(),
                })
                .collect(),
        )
    }

    /// Records `n` violations of `check`, described by `detail` (built only
    /// while there is room for it).
    fn add(&mut self, check: &str, n: u64, detail: impl FnOnce() -> String) {
        let c = self
            .0
            .iter_mut()
            .find(|c| c.name == check)
            .expect("a check of CHECKS");
        c.violations += n;
        if c.details.len() < DETAILS_MAX {
            c.details.push(detail());
        }
    }

    fn one(&mut self, check: &str, detail: impl FnOnce() -> String) {
        self.add(check, 1, detail);
    }

    fn into_report(self, checked_at: String) -> InvariantReport {
        let checks: Vec<CheckResult> = self
            .0
            .into_iter()
            .map(|c| {
                let mut details = c.details;
                let shown = details.len() as u64;
                if c.violations > shown && shown == DETAILS_MAX as u64 {
                    details.push(format!("… and {} more", c.violations - shown));
                }
                CheckResult {
                    check: c.name.to_string(),
                    ok: c.violations == 0,
                    violations: c.violations,
                    details,
                }
            })
            .collect();
        InvariantReport {
            checked_at,
            ok: checks.iter().all(|c| c.ok),
            checks,
        }
    }
}

/// Checks the invariants of `skus` (every SKU in MySQL when empty). `progress(done, total)` hears
/// about each SKU checked.
pub async fn run(
    res: &Resources,
    skus: &[SkuId],
    progress: &mut (dyn FnMut(usize, usize) + Send),
) -> Result<InvariantReport, InvariantCheckError> {
    let checked_at = crate::clock::rfc3339_ms(crate::clock::unix_ms());
    let now_ms = res.redis.now_ms().await?;
    let mut checks = Checks::new();
    let facts = mysql::global_checks(res, skus, now_ms, &mut checks).await?;
    for (done, sku) in facts.iter().enumerate() {
        stores::check_sku(res, sku.sku_id, &mut checks).await?;
        cross::check_sku(res, sku.sku_id, now_ms, &mut checks).await?;
        progress(done + 1, facts.len());
    }
    orders::check(res, skus, &mut checks).await?;
    broker::check(res, skus, &mut checks).await?;
    Ok(checks.into_report(checked_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_capped_with_a_line_saying_how_many_more() {
        let mut checks = Checks::new();
        for i in 0..25 {
            checks.one(STORES_AGREE, || format!("sku {i}"));
        }
        checks.add(QUEUES_DRAINED, 3, || "stockd.deduct: 3 messages".into());
        let report = checks.into_report("t".into());
        assert!(!report.ok);
        assert_eq!(report.failed(), [STORES_AGREE, QUEUES_DRAINED]);
        let agree = report.check(STORES_AGREE).unwrap();
        assert_eq!(agree.violations, 25);
        assert_eq!(agree.details.len(), DETAILS_MAX + 1);
        assert_eq!(agree.details.last().unwrap(), "… and 5 more");
        assert_eq!(report.check(QUEUES_DRAINED).unwrap().details.len(), 1);
        assert!(report.check(MYSQL_NON_NEGATIVE).unwrap().ok);
    }

    #[test]
    fn the_json_shape_is_the_documented_one() {
        let report = Checks::new().into_report("2026-01-01T00:00:00.000Z".into());
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["ok"], true);
        assert_eq!(json["checks"].as_array().unwrap().len(), CHECKS.len());
        let first = &json["checks"][0];
        let keys: Vec<&str> = first
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["check", "details", "ok", "violations"]);
        assert_eq!(first["check"], MYSQL_NON_NEGATIVE);
        assert!(report
            .table()
            .contains("audit at 2026-01-01T00:00:00.000Z: OK"));
    }
}
