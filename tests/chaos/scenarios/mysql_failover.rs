//! What the MySQL failover scenarios share (s17: the loss and its repair,
//! s17b: semi-sync avoids it): the start and the load, the failover (the
//! replica's lag, the kill with the GTID positions around it, the promotion
//! and re-point, hasty or careful), the wait until nothing is left to apply, and the count of what MySQL lost — acknowledged reservations the
//! new primary's ledger lacks, confirms and cancels answered 200 it does not
//! hold — plus the order service's retry of those decisions and the final
//! `stockd reconcile --once` verdicts.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Scenario;
use crate::load::{Load, LoadReport, Op};
use crate::servers::mariadb_replica::GtidPositions;
use crate::stack::Stack;
use crate::stores;

/// A reservation: (sku, request id).
pub(super) type Key = (u64, String);

pub(super) const SKUS: [u64; 3] = [171, 172, 173];
/// No SKU sells out: every missing row is then a lost deduction, not a refusal.
pub(super) const STOCK: i64 = 5_000;
pub(super) const LIMIT_PER_USER: i64 = 3;
pub(super) const BUYERS: u64 = 900;
pub(super) const RATE_PER_SEC: u32 = 100;
/// Upper bound of the plan (40 s at the rate); the load is stopped
/// [`AFTER_SWITCH`] after the proxy was re-pointed.
pub(super) const REQUESTS: usize = 4_000;
/// Load before the replica lags (the consumer is busy, the replica in sync).
pub(super) const WARM_MS: u64 = 3_000;
/// How long the primary commits what the replica does not apply (the 2.5 s).
pub(super) const LAG_MS: u64 = 2_500;
/// Load after the switch: reservations after the failover must land.
pub(super) const AFTER_SWITCH: Duration = Duration::from_secs(4);
/// The consumer's breaker probes MySQL at most 2 s apart: it writes to the
/// promoted replica well within this.
pub(super) const RESUME_LIMIT: Duration = Duration::from_secs(15);
/// Outboxes and work queues empty after the load (the consumer catching up).
pub(super) const SETTLE_LIMIT: Duration = Duration::from_secs(60);
/// base.yaml's MySQL timeouts (test.yaml's 20 s would let one request wait
/// out the whole failover): a dead server answers 503 quickly.
pub(super) fn settings() -> Vec<(&'static str, String)> {
    vec![
        ("STOCKD__MYSQL__CONNECT_TIMEOUT_SECS", "2".into()),
        ("STOCKD__MYSQL__QUERY_TIMEOUT_MS", "3000".into()),
    ]
}

/// When the fault's steps happened (ms since the load started) and where
/// replication stood.
pub(super) struct Failover {
    pub lag_from_ms: u64,
    pub killed_ms: u64,
    pub switched_ms: u64,
    /// Primary's position just before the kill, replica's just after it.
    pub at_kill: GtidPositions,
}

/// kill -9 of the primary, with the GTID positions around it: the
/// primary's just before, the replica's just after.
pub(super) async fn kill_primary(sc: &mut Scenario, load: &Load) -> (u64, GtidPositions) {
    let written = sc.stack.mysql.pair().positions().await.primary_written;
    let port = sc.stack.mysql.pair().primary.port;
    sc.note(&format!("inject: kill -9 primary mariadbd :{port}"));
    sc.stack.mysql.pair_mut().kill_primary();
    let killed_ms = load.elapsed_ms();
    let (received, applied) = sc.stack.mysql.pair().replica_positions().await;
    let at_kill = GtidPositions {
        primary_written: written,
        replica_received: received,
        replica_applied: applied,
    };
    sc.note(&format!(
        "GTID: primary wrote {}, replica received {} and applied {}: {} transactions \
         not applied ({} not even received)",
        at_kill.primary_written,
        at_kill.replica_received,
        at_kill.replica_applied,
        at_kill.not_applied(),
        at_kill.not_received()
    ));
    (killed_ms, at_kill)
}

/// Promotes the replica, re-points the proxy and waits until stockd writes
/// to the new primary by itself; returns when the proxy moved (load ms).
pub(super) async fn promote_and_repoint(sc: &mut Scenario, load: &Load, killed_ms: u64) -> u64 {
    sc.stack.mysql.pair_mut().promote().await;
    let rows_at_promotion = stores::ledger_len(&sc.stack).await;
    sc.stack.mysql.pair().repoint();
    let switched_ms = load.elapsed_ms();
    sc.note(&format!(
        "proxy re-pointed to the promoted replica :{} ({} ms after the kill)",
        sc.stack.mysql.pair().replica.port,
        switched_ms - killed_ms
    ));
    let stack = &sc.stack;
    let resumed = sc
        .wait_for(
            "the consumer applies on the new primary",
            RESUME_LIMIT,
            || async { stores::ledger_len(stack).await > rows_at_promotion },
        )
        .await;
    sc.expect(
        resumed,
        "stockd writes to the promoted replica without a restart".into(),
    );
    switched_ms
}

/// Waits until nothing is left to apply: outboxes empty and no message
/// (ready or unacknowledged) in the work queues. What the ledger lacks then
/// is lost, not late.
pub(super) async fn settle(sc: &Scenario) {
    let stack = &sc.stack;
    let settled = sc
        .wait_for("outboxes and work queues empty", SETTLE_LIMIT, || async {
            let mut outbox = 0;
            for sku in SKUS {
                outbox += stores::outbox_len(stack, sku).await;
            }
            let work = stores::work_queues(stack);
            let queued: u64 = (stack.rabbit.list_queues().await.iter())
                .filter(|q| work.contains(&q.0))
                .map(|q| q.1)
                .sum();
            outbox == 0 && queued == 0
        })
        .await;
    assert!(settled, "the pipeline never emptied after the failover");
}

/// What the failover took from MySQL, read once the pipeline is empty.
pub(super) struct Loss {
    /// Acknowledged reservations sent before the switch that the new
    /// primary's ledger lacks.
    pub lost: Vec<Key>,
    pub units: i64,
    /// Of those, answered 200 to a confirm before the kill.
    pub confirmed: usize,
    /// Confirms and cancels answered 200 before the kill whose decision the
    /// new primary lacks (its row is missing or still `RESERVED`).
    pub decisions: usize,
    /// Lost reservations whose Redis record is gone too (not recoverable).
    pub without_record: usize,
}

/// Counts the loss (every reservation sent after the switch must be in the
/// ledger, every lost one must still have its Redis record).
pub(super) async fn count_loss(sc: &mut Scenario, report: &LoadReport, f: &Failover) -> Loss {
    let accepted = report.accepted();
    let first_sent = first_sent_ms(report);
    let ledger = stores::ledger(&sc.stack).await;
    let rows = stores::by_key(&ledger);
    let missing: Vec<&Key> = accepted.keys().filter(|k| !rows.contains_key(*k)).collect();
    let (lost, late): (Vec<&Key>, Vec<&Key>) = missing
        .into_iter()
        .partition(|k| first_sent[*k] < f.switched_ms);
    let lost: Vec<Key> = lost.into_iter().cloned().collect();
    let units = lost.iter().map(|k| i64::from(accepted[k].1)).sum();
    let decided = decided_before(report, f.killed_ms);
    let confirmed = (lost.iter())
        .filter(|k| decided.get(*k) == Some(&"CONFIRMED"))
        .count();
    let decisions = (decided.iter())
        .filter(|(k, want)| rows.get(*k).is_none_or(|r| r.status != **want))
        .count();
    let records = stores::record_statuses(&sc.stack, &lost).await;
    let without_record = records.values().filter(|s| s.is_none()).count();
    sc.note(&format!(
        "lost by the failover: {} acknowledged reservations ({units} units) without a ledger \
         row on the new primary, {confirmed} of them confirmed before the kill; {decisions} \
         confirms/cancels answered 200 before the kill not in MySQL; {without_record} lost \
         without their Redis record",
        lost.len()
    ));
    sc.expect(
        without_record == 0,
        format!("every lost reservation still has its Redis record ({without_record} without)"),
    );
    sc.expect(
        late.is_empty(),
        format!(
            "every reservation sent after the switch is in the ledger ({} missing: {:?})",
            late.len(),
            late.iter().take(5).collect::<Vec<_>>()
        ),
    );
    Loss {
        lost,
        units,
        confirmed,
        decisions,
        without_record,
    }
}

/// When each accepted reservation was first sent (ms since the load started).
pub(super) fn first_sent_ms(report: &LoadReport) -> BTreeMap<Key, u64> {
    let mut first: BTreeMap<Key, u64> = BTreeMap::new();
    for a in report.answers.iter().filter(|a| a.accepted()) {
        let at = first.entry((a.sku, a.rid.clone())).or_insert(a.sent_ms);
        *at = (*at).min(a.sent_ms);
    }
    first
}

/// Ledger status each confirm/cancel answered 200 before `before_ms` decided.
pub(super) fn decided_before(report: &LoadReport, before_ms: u64) -> BTreeMap<Key, &'static str> {
    (report.answers.iter())
        .filter(|a| a.status == 200 && a.sent_ms + a.latency_ms < before_ms)
        .filter_map(|a| match a.op {
            Op::Confirm => Some(((a.sku, a.rid.clone()), "CONFIRMED")),
            Op::Cancel => Some(((a.sku, a.rid.clone()), "RELEASED")),
            Op::Reserve => None,
        })
        .collect()
}

/// Lost reservations still without a ledger row, counted by the status of
/// their Redis record (what the repair had to go on).
pub(super) async fn still_missing_by_record(
    stack: &Stack,
    lost: &[Key],
    rows: &BTreeMap<Key, &stores::LedgerRow>,
) -> BTreeMap<String, usize> {
    let missing: Vec<Key> = (lost.iter())
        .filter(|k| !rows.contains_key(*k))
        .cloned()
        .collect();
    let records = stores::record_statuses(stack, &missing).await;
    let mut by_status = BTreeMap::new();
    for status in records.into_values() {
        *by_status
            .entry(status.unwrap_or_else(|| "no record".into()))
            .or_default() += 1;
    }
    by_status
}

/// The order service's retry after the failover: every confirm and cancel
/// answered 200 before the kill is sent again and must answer 200 again
/// ("repeats are 200", whatever MySQL lost).
pub(super) async fn repeat_decisions(sc: &mut Scenario, report: &LoadReport, f: &Failover) {
    let decided = decided_before(report, f.killed_ms);
    let mut answers: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for ((sku, rid), status) in &decided {
        let (op, action) = if *status == "CONFIRMED" {
            (Op::Confirm, "confirm")
        } else {
            (Op::Cancel, "cancel")
        };
        // Through the harness, so the history check sees the repeats too.
        let code = sc.send(op, *sku, rid, 0, 0).await.status;
        answers
            .entry(code)
            .or_default()
            .push(format!("{action} {sku}/{rid}"));
    }
    let not_200: Vec<&String> = (answers.iter())
        .filter(|(code, _)| **code != 200)
        .flat_map(|(_, ids)| ids)
        .collect();
    let by_code: BTreeMap<u16, usize> = answers.iter().map(|(c, ids)| (*c, ids.len())).collect();
    sc.expect(
        not_200.is_empty(),
        format!(
            "a repeat of each of the {} confirms/cancels answered 200 before the kill answers \
             200 again (by status {by_code:?}; not 200: {:?})",
            decided.len(),
            not_200.iter().take(5).collect::<Vec<_>>()
        ),
    );
}

/// The start both scenarios share: the primary + replica pair, every role,
/// the SKUs created and replicated.
pub(super) async fn begin(name: &str, title: &str) -> Scenario {
    let mut sc = Scenario::begin_mysql_pair(name, title, &settings()).await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    for sku in SKUS {
        sc.stack.create_sku(sku, STOCK, LIMIT_PER_USER).await;
    }
    sc.stack.mysql.pair().wait_caught_up().await;
    sc
}

/// The load, running [`WARM_MS`] (+ jitter) before the failover begins.
pub(super) async fn start_load(sc: &mut Scenario, tag: &str) -> Load {
    let load = sc.load(super::plan(tag, &SKUS, BUYERS, REQUESTS, RATE_PER_SEC));
    sc.pause(WARM_MS, 1_000).await;
    load
}

/// How the replica falls behind and is promoted.
pub(super) enum Promotion {
    /// s17: its applier stops (it receives, applies nothing); promoted at
    /// once after the kill, the unapplied relay log deleted.
    Hasty,
    /// s17b: its receiver stops (nothing more reaches it); promoted once it
    /// has applied its relay log.
    Careful,
}

/// Lag for [`LAG_MS`], kill -9 of the primary, promotion, re-point.
pub(super) async fn fail_over(sc: &mut Scenario, load: &Load, how: Promotion) -> Failover {
    match how {
        Promotion::Hasty => {
            sc.note("inject: STOP SLAVE SQL_THREAD on the replica (it receives, applies nothing)");
            sc.stack.mysql.pair().stop_applier().await;
        }
        Promotion::Careful => {
            sc.note("inject: STOP SLAVE IO_THREAD on the replica (it receives nothing more)");
            sc.stack.mysql.pair().stop_receiver().await;
        }
    }
    let lag_from_ms = load.elapsed_ms();
    sc.pause(LAG_MS, 0).await;
    let (killed_ms, at_kill) = kill_primary(sc, load).await;
    match how {
        Promotion::Hasty => sc.note(
            "promote the replica at once: STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only=0",
        ),
        Promotion::Careful => {
            sc.note("let the replica apply its relay log, then promote it");
            sc.stack.mysql.pair().wait_relay_log_applied().await;
        }
    }
    let switched_ms = promote_and_repoint(sc, load, killed_ms).await;
    Failover {
        lag_from_ms,
        killed_ms,
        switched_ms,
        at_kill,
    }
}

/// [`AFTER_SWITCH`] more load on the new primary, then the load stopped and
/// finished, its answers sane, and nothing left to apply ([`settle`]).
pub(super) async fn stop_load(sc: &mut Scenario, load: Load) -> LoadReport {
    tokio::time::sleep(AFTER_SWITCH).await;
    sc.note("stop the load");
    load.stop_sending();
    let report = load.finish().await;
    sc.expect_sane_answers(&report);
    settle(sc).await;
    report
}

/// `stockd reconcile --once` finds every SKU OK (or in flight): `what`
/// names the expectation.
pub(super) async fn expect_healthy(sc: &mut Scenario, what: &str) {
    let verdicts = super::reconcile::check(sc).await;
    let healthy = (verdicts.skus.iter()).all(|s| s.1 == "OK" || s.1 == "IN_FLIGHT");
    sc.expect(healthy, format!("{what} ({:?})", verdicts.skus));
}
