//! Scenario 10: MySQL is down for 20 s across the expiry of two pending
//! reservations (TTL 5 s). The expiry messages arrive while MySQL is down;
//! they must wait, not be dead-lettered, and both reservations are released
//! exactly once when MySQL is back.

use std::time::Duration;

use super::Scenario;
use crate::load::{Answer, LoadReport, Op};
use crate::stores;

const TTL_SECS: u64 = 5;
const OUTAGE: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s10_mysql_down_across_expiry_releases_both_without_dead_letters() {
    let ttl = [("STOCKD__RESERVATION__TTL_SECS", TTL_SECS.to_string())];
    let mut sc = Scenario::begin(
        "s10",
        "20 s MySQL outage across the expiry of 2 reservations",
        &ttl,
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    sc.stack.create_sku(101, 10, 2).await;
    let mut answers = Vec::new();
    for (rid, user) in [("s10-a", 1), ("s10-b", 2)] {
        let r = sc.reserve(101, rid, user, 1).await;
        sc.expect(
            r.status == 201,
            format!("{rid} answered 201 (got {})", r.status),
        );
        answers.push(Answer {
            op: Op::Reserve,
            sku: 101,
            rid: rid.into(),
            user,
            count: 1,
            status: r.status,
            code: r.code,
            sent_ms: 0,
            latency_ms: 0,
        });
    }
    let stack = &sc.stack;
    sc.wait_for("both applied in MySQL", Duration::from_secs(20), || async {
        stores::ledger_status(stack, 101, "s10-a").await.is_some()
            && stores::ledger_status(stack, 101, "s10-b").await.is_some()
    })
    .await;
    sc.note("inject: kill -9 mariadbd for 20 s (expiry falls in the outage)");
    sc.stack.mysql.kill9();
    tokio::time::sleep(OUTAGE).await;
    let expiry_dlq = sc.stack.topology.expiry_dlq.clone();
    let dlq = sc.stack.rabbit.ready(&expiry_dlq).await;
    sc.note(&format!(
        "restart mariadbd ({expiry_dlq}: {dlq:?} messages)"
    ));
    sc.stack.mysql.restart().await;
    let stack = &sc.stack;
    let released = sc
        .wait_for(
            "both RELEASED in MySQL",
            Duration::from_secs(30),
            || async {
                stores::ledger_status(stack, 101, "s10-a").await.as_deref() == Some("RELEASED")
                    && stores::ledger_status(stack, 101, "s10-b").await.as_deref()
                        == Some("RELEASED")
            },
        )
        .await;
    sc.expect(
        released,
        "both reservations released after the outage".into(),
    );
    let available = stores::redis_available(&sc.stack, 101).await;
    sc.expect(
        available == Some(10),
        format!("Redis available back to 10 ({available:?})"),
    );
    sc.finish(&LoadReport::new("s10", answers)).await;
}
