//! Scenario 17b: the same failover as s17 with semi-synchronous replication
//! and a careful promotion — what docs/operations.md ("MySQL failover") says
//! avoids the loss. Semi-sync is turned on (`AFTER_SYNC`) before the load;
//! under load the replica's **I/O thread** stops (`STOP SLAVE IO_THREAD`: the
//! replication link is gone, the worst case for asynchronous replication, as
//! nothing more reaches the replica at all); ~2.5 s later the primary is
//! killed (-9); the replica applies its relay log before `STOP SLAVE; RESET
//! SLAVE ALL; SET GLOBAL read_only=0`; the proxy is re-pointed.
//!
//! With semi-sync the primary's commits wait for the replica's receipt: while
//! the link is down no commit returns, so the consumer acknowledges nothing
//! it has not got on the replica (its batches time out, the breaker holds
//! the deliveries, and they are applied on the promoted replica). Expected:
//! no acknowledged reservation and no confirm/cancel answered 200 missing,
//! `stockd reconcile --once` healthy without a repair, audit clean.

use super::mysql_failover::{
    count_loss, kill_primary, promote_and_repoint, repeat_decisions, settings, settle, Failover,
    AFTER_SWITCH, BUYERS, LAG_MS, LIMIT_PER_USER, RATE_PER_SEC, REQUESTS, SKUS, STOCK, WARM_MS,
};
use super::reconcile;
use super::{plan, Scenario};
use crate::load::Load;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s17b_mysql_failover_with_semi_sync_and_a_careful_promotion_loses_nothing() {
    let mut sc = Scenario::begin_mysql_pair(
        "s17b",
        "MySQL primary kill -9 with semi-synchronous replication, replica cut off",
        &settings(),
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    for sku in SKUS {
        sc.stack.create_sku(sku, STOCK, LIMIT_PER_USER).await;
    }
    sc.stack.mysql.pair().wait_caught_up().await;
    sc.stack.mysql.pair().enable_semi_sync().await;
    let load = sc.load(plan("s17b", &SKUS, BUYERS, REQUESTS, RATE_PER_SEC));
    sc.pause(WARM_MS, 1_000).await;
    let failover = fail_over_carefully(&mut sc, &load).await;
    tokio::time::sleep(AFTER_SWITCH).await;
    sc.note("stop the load");
    load.stop_sending();
    let report = load.finish().await;
    sc.expect_sane_answers(&report);
    settle(&sc).await;
    let loss = count_loss(&mut sc, &report, &failover).await;
    println!(
        "[s17b] counts: acknowledged {}, replica cut off {:.1} s, {} transactions the primary \
         wrote that the replica never received, lost by the failover {} ({} units), confirms/cancels lost {}",
        report.accepted().len(),
        (failover.killed_ms - failover.lag_from_ms) as f64 / 1000.0,
        failover.at_kill.not_received(),
        loss.lost.len(),
        loss.units,
        loss.decisions
    );
    sc.expect(
        loss.lost.is_empty() && loss.decisions == 0,
        format!(
            "semi-sync + careful promotion: nothing acknowledged lost ({} reservations, {} \
             confirms/cancels)",
            loss.lost.len(),
            loss.decisions
        ),
    );
    repeat_decisions(&mut sc, &report, &failover).await;
    let verdicts = reconcile::check(&sc).await;
    let healthy = (verdicts.skus.iter()).all(|s| s.1 == "OK" || s.1 == "IN_FLIGHT");
    sc.expect(
        healthy,
        format!("no repair needed: every SKU OK ({:?})", verdicts.skus),
    );
    sc.finish(&report).await;
}

/// Replica cut off, kill -9, relay log applied, promotion, re-point.
async fn fail_over_carefully(sc: &mut Scenario, load: &Load) -> Failover {
    sc.note("inject: STOP SLAVE IO_THREAD on the replica (it receives nothing more)");
    sc.stack.mysql.pair().stop_receiver().await;
    let lag_from_ms = load.elapsed_ms();
    sc.pause(LAG_MS, 0).await;
    let (killed_ms, at_kill) = kill_primary(sc, load).await;
    sc.note("let the replica apply its relay log, then promote it");
    sc.stack.mysql.pair().wait_relay_log_applied().await;
    let switched_ms = promote_and_repoint(sc, load, killed_ms).await;
    Failover {
        lag_from_ms,
        killed_ms,
        switched_ms,
        at_kill,
    }
}
