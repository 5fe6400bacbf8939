//! Scenario 5: MySQL is killed with SIGKILL for 20 s under load. Reservations
//! do not need MySQL and keep being answered 201/202; the consumer's batches
//! fail meanwhile. After the restart everything must reach MySQL and nothing
//! may be dead-lettered (a dependency outage is not an attempt, contract §3).

use super::{open_load, Scenario};
use crate::load::Op;

/// How long MySQL stays down.
const OUTAGE_MS: u64 = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s05_mysql_down_20s_under_load_reaches_mysql_without_dead_letters() {
    let mut sc = Scenario::begin("s05", "MySQL kill -9 for 20 s under load", &[]).await;
    // (base, jitter) ms before the fault.
    let lead = (3_000, 2_000);
    let load = open_load(&mut sc, &[51, 52], (1_000, 2), (700, 2_400, 80), lead).await;
    let down_ms = sc.inject(&load, "kill -9 mariadbd", |s| s.mysql.kill9());
    tokio::time::sleep(std::time::Duration::from_millis(OUTAGE_MS)).await;
    sc.note("restart mariadbd (crash recovery)");
    sc.stack.mysql.restart().await;
    let up_ms = load.elapsed_ms();
    let report = load.finish().await;
    let during: Vec<_> = report
        .answers
        .iter()
        .filter(|a| a.op == Op::Reserve && a.sent_ms >= down_ms && a.sent_ms < up_ms)
        .collect();
    let refused: Vec<_> = during
        .iter()
        .filter(|a| a.status >= 500 || a.status == 0)
        .collect();
    sc.expect(
        refused.is_empty() && !during.is_empty(),
        format!(
            "reserves during the MySQL outage answered without it ({} of {} were 5xx/unanswered)",
            refused.len(),
            during.len()
        ),
    );
    sc.finish(&report).await;
}
