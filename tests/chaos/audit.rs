//! The end-of-scenario audit (contract §10). Two sources, same check names:
//! - `stockd audit --json` against the private servers, when the binary has it;
//! - the harness's own reads of MySQL, Redis and RabbitMQ (always), plus what
//!   only the harness knows: every request id answered 201/202 (or replayed)
//!   has a ledger row.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::stack::Stack;
use crate::stores::{self, LedgerRow, SkuRow, LIVE};

/// Slack on top of ttl + closer grace + sweep period before an unreleased
/// expired reservation counts as a violation (process scheduling on 2 cores).
const EXPIRY_SLACK_MS: u64 = 3_000;
/// Details listed per check.
const MAX_DETAILS: usize = 8;

#[derive(Debug, Clone, Deserialize)]
pub struct Check {
    pub check: String,
    pub ok: bool,
    pub violations: u64,
    #[serde(default)]
    pub details: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Audit {
    #[serde(default)]
    pub source: String,
    pub ok: bool,
    pub checks: Vec<Check>,
}

impl Audit {
    fn from_checks(source: &str, checks: Vec<Check>) -> Self {
        Self {
            source: source.to_string(),
            ok: checks.iter().all(|c| c.ok),
            checks,
        }
    }

    pub fn failed(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| {
                let first = c.details.first().cloned().unwrap_or_default();
                format!(
                    "{}:{} violations={} {first}",
                    self.source, c.check, c.violations
                )
            })
            .collect()
    }

    pub fn print(&self) {
        println!("  audit ({}): ok = {}", self.source, self.ok);
        println!(
            "    {:<22} {:<4} {:>10}  details",
            "check", "ok", "violations"
        );
        for c in &self.checks {
            let details: Vec<&String> = c.details.iter().take(3).collect();
            println!(
                "    {:<22} {:<4} {:>10}  {}",
                c.check,
                if c.ok { "yes" } else { "NO" },
                c.violations,
                details
                    .iter()
                    .map(|d| d.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
}

fn check(name: &str, details: Vec<String>) -> Check {
    Check {
        check: name.to_string(),
        ok: details.is_empty(),
        violations: details.len() as u64,
        details: details.into_iter().take(MAX_DETAILS).collect(),
    }
}

/// `stockd audit --json`; None while the binary has no `audit` subcommand.
pub async fn cli_audit(stack: &Stack) -> Option<Audit> {
    let out = stack.cli(&["audit", "--json"]).await;
    if out.code == Some(2) && out.stderr.contains("unrecognized subcommand") {
        return None;
    }
    match serde_json::from_str::<Audit>(out.stdout.trim()) {
        Ok(mut audit) => {
            audit.source = "stockd audit".into();
            if out.code != Some(if audit.ok { 0 } else { 1 }) {
                println!(
                    "  stockd audit exit code {:?} does not match ok={}",
                    out.code, audit.ok
                );
            }
            Some(audit)
        }
        Err(err) => Some(Audit::from_checks(
            "stockd audit",
            vec![check(
                "audit_ran",
                vec![format!(
                    "exit {:?}, unparsable ({err}): {}",
                    out.code,
                    out.text()
                )],
            )],
        )),
    }
}

/// The harness's own audit of the whole stack.
pub async fn harness_audit(stack: &Stack, accepted: &BTreeMap<(u64, String), (u64, u32)>) -> Audit {
    let skus = stores::sku_rows(stack).await;
    let ledger = stores::ledger(stack).await;
    let buyer_units = live_units_by_buyer(&ledger);
    let mut checks = mysql_checks(&skus, &ledger, &buyer_units);
    checks.extend(redis_checks(stack, &skus).await);
    checks.extend(record_checks(stack, &ledger, &skus).await);
    checks.push(counter_check(stack, &ledger, &buyer_units).await);
    checks.push(outbox_check(stack, &skus).await);
    checks.extend(queue_checks(stack).await);
    checks.push(expiry_check(stack, &ledger).await);
    checks.extend(ledger_checks(&ledger, accepted));
    Audit::from_checks("harness", checks)
}

/// Live units per (sku, buyer) in the ledger.
fn live_units_by_buyer(ledger: &[LedgerRow]) -> BTreeMap<(u64, u64), i64> {
    let mut buyer_units: BTreeMap<(u64, u64), i64> = BTreeMap::new();
    for row in ledger.iter().filter(|r| r.live()) {
        *buyer_units.entry((row.sku, row.user)).or_default() += row.count;
    }
    buyer_units
}

/// MySQL alone: stock never negative, conserved (total - available = live
/// units), no buyer over the SKU's limit.
fn mysql_checks(
    skus: &[SkuRow],
    ledger: &[LedgerRow],
    buyer_units: &BTreeMap<(u64, u64), i64>,
) -> Vec<Check> {
    let negative = skus
        .iter()
        .filter(|s| s.available < 0)
        .map(|s| format!("sku {} available {}", s.sku, s.available))
        .collect();
    let mut live_units: BTreeMap<u64, i64> = BTreeMap::new();
    for row in ledger.iter().filter(|r| r.live()) {
        *live_units.entry(row.sku).or_default() += row.count;
    }
    let conservation = skus
        .iter()
        .filter_map(|s| {
            let live = live_units.get(&s.sku).copied().unwrap_or(0);
            (s.total - s.available != live).then(|| {
                format!(
                    "sku {}: total {} - available {} != live {live}",
                    s.sku, s.total, s.available
                )
            })
        })
        .collect();
    let limits: BTreeMap<u64, i64> = skus.iter().map(|s| (s.sku, s.limit)).collect();
    let over = buyer_units
        .iter()
        .filter(|((sku, _), units)| **units > limits.get(sku).copied().unwrap_or(i64::MAX))
        .map(|((sku, user), units)| {
            format!(
                "sku {sku} user {user}: {units} live > limit {}",
                limits[sku]
            )
        })
        .collect();
    vec![
        check("mysql_non_negative", negative),
        check("mysql_conservation", conservation),
        check("buyer_limit", over),
    ]
}

/// Every SKU loaded in Redis, with the available count MySQL has.
async fn redis_checks(stack: &Stack, skus: &[SkuRow]) -> Vec<Check> {
    let mut not_loaded = Vec::new();
    let mut disagree = Vec::new();
    for s in skus {
        match stores::redis_available(stack, s.sku).await {
            None => not_loaded.push(format!("sku {} not in Redis", s.sku)),
            Some(r) if r != s.available => {
                disagree.push(format!("sku {}: redis {r} != mysql {}", s.sku, s.available))
            }
            Some(_) => {}
        }
    }
    vec![
        check("redis_loaded", not_loaded),
        check("stores_agree", disagree),
    ]
}

/// Redis's per-buyer counters equal the buyer's live units in MySQL.
async fn counter_check(
    stack: &Stack,
    ledger: &[LedgerRow],
    buyer_units: &BTreeMap<(u64, u64), i64>,
) -> Check {
    let buyers: Vec<(u64, u64)> = ledger
        .iter()
        .map(|r| (r.sku, r.user))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let counters = stores::user_counters(stack, &buyers).await;
    let wrong_counters = counters
        .iter()
        .filter_map(|(key, redis)| {
            let mysql = buyer_units.get(key).copied().unwrap_or(0);
            (*redis != mysql).then(|| {
                format!(
                    "sku {} user {}: redis {redis} != mysql live {mysql}",
                    key.0, key.1
                )
            })
        })
        .collect();
    check("redis_buyer_counters", wrong_counters)
}

/// No SKU's outbox holds an entry.
async fn outbox_check(stack: &Stack, skus: &[SkuRow]) -> Check {
    let mut outbox = Vec::new();
    for s in skus {
        let n = stores::outbox_len(stack, s.sku).await;
        if n > 0 {
            outbox.push(format!("sku {}: {n} outbox entries", s.sku));
        }
    }
    check("outbox_empty", outbox)
}

/// No reservation left RESERVED past its expiry plus the closer's bound.
async fn expiry_check(stack: &Stack, ledger: &[LedgerRow]) -> Check {
    let now = stores::redis_now_ms(stack).await;
    let closer = &stack.settings.closer;
    let bound = closer.grace_ms + closer.sweep_interval_ms + EXPIRY_SLACK_MS;
    let unreleased = ledger
        .iter()
        .filter(|r| r.status == "RESERVED" && r.expires_at_ms + bound < now)
        .map(|r| {
            format!(
                "sku {} {} expired {} ms ago",
                r.sku,
                r.rid,
                now - r.expires_at_ms
            )
        })
        .collect();
    check("expired_released", unreleased)
}

/// Every accepted reservation in the ledger (the REJECTED ones printed),
/// and no Redis mirror still pending.
fn ledger_checks(
    ledger: &[LedgerRow],
    accepted: &BTreeMap<(u64, String), (u64, u32)>,
) -> Vec<Check> {
    let keys = stores::by_key(ledger);
    let missing = accepted
        .keys()
        .filter(|k| !keys.contains_key(*k))
        .map(|(sku, rid)| format!("sku {sku} {rid} answered 201/202 but not in the ledger"))
        .collect();
    let accepted_in_ledger = check("accepted_in_ledger", missing);
    print_rejected(ledger, accepted);
    let pending = ledger
        .iter()
        .filter(|r| r.redis_pending)
        .map(|r| format!("sku {} {} {}", r.sku, r.rid, r.status))
        .collect();
    vec![accepted_in_ledger, check("mirrors_settled", pending)]
}

/// Accepted reservations MySQL refused (REJECTED: over-admitted after a Redis
/// loss) are legitimate outcomes, not losses; print how many and why.
fn print_rejected(ledger: &[stores::LedgerRow], accepted: &BTreeMap<(u64, String), (u64, u32)>) {
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for row in ledger.iter().filter(|r| r.status == "REJECTED") {
        if accepted.contains_key(&(row.sku, row.rid.clone())) {
            let reason = row.reason.clone().unwrap_or_else(|| "-".into());
            *reasons.entry(reason).or_default() += 1;
        }
    }
    if !reasons.is_empty() {
        println!("  accepted but REJECTED in MySQL, by reason: {reasons:?}");
    }
}

/// ledger_in_redis and redis_in_ledger: every live ledger row has a Redis
/// record in the same state, and every live Redis winner a live ledger row.
async fn record_checks(
    stack: &Stack,
    ledger: &[stores::LedgerRow],
    skus: &[stores::SkuRow],
) -> Vec<Check> {
    let live_ids: Vec<(u64, String)> = ledger
        .iter()
        .filter(|r| r.live())
        .map(|r| (r.sku, r.rid.clone()))
        .collect();
    let statuses = stores::record_statuses(stack, &live_ids).await;
    let keys = stores::by_key(ledger);
    let ledger_in_redis = statuses
        .iter()
        .filter_map(|(id, redis)| {
            let mysql = &keys[id].status;
            (redis.as_deref() != Some(mysql.as_str()))
                .then(|| format!("sku {} {}: mysql {mysql}, redis {redis:?}", id.0, id.1))
        })
        .collect();

    let mut winner_ids = Vec::new();
    for s in skus {
        for rid in stores::winners(stack, s.sku).await {
            winner_ids.push((s.sku, rid));
        }
    }
    let winner_statuses = stores::record_statuses(stack, &winner_ids).await;
    let redis_in_ledger = winner_statuses
        .iter()
        .filter(|(_, st)| st.as_deref().is_some_and(|s| LIVE.contains(&s)))
        .filter_map(|(id, redis)| {
            let mysql = keys.get(id).map(|r| r.status.as_str());
            (mysql != redis.as_deref())
                .then(|| format!("sku {} {}: redis {redis:?}, mysql {mysql:?}", id.0, id.1))
        })
        .collect();
    vec![
        check("ledger_in_redis", ledger_in_redis),
        check("redis_in_ledger", redis_in_ledger),
    ]
}

/// queues_drained and dlq_empty, from rabbitmqctl (ready + unacked).
async fn queue_checks(stack: &Stack) -> Vec<Check> {
    let queues = stack.rabbit.list_queues().await;
    let count = |name: &str| queues.iter().find(|q| q.0 == name).map(|q| q.1);
    let busy = |names: Vec<String>| -> Vec<String> {
        names
            .iter()
            .filter_map(|n| match count(n) {
                Some(0) => None,
                Some(m) => Some(format!("{n}: {m} messages")),
                None => Some(format!("{n}: missing")),
            })
            .collect()
    };
    vec![
        check("queues_drained", busy(stores::work_queues(stack))),
        check("dlq_empty", busy(stores::dead_letter_queues(stack))),
    ]
}

/// Runs both audits, prints them; returns the failed checks (empty = clean).
pub async fn audit_all(
    stack: &Stack,
    accepted: &BTreeMap<(u64, String), (u64, u32)>,
) -> Vec<String> {
    let mut failed = Vec::new();
    let harness = harness_audit(stack, accepted).await;
    harness.print();
    failed.extend(harness.failed());
    match cli_audit(stack).await {
        Some(cli) => {
            cli.print();
            failed.extend(cli.failed());
        }
        None => println!("  stockd audit: not in this binary yet (harness audit only)"),
    }
    failed
}
