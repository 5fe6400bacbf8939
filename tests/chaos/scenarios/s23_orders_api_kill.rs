//! Scenario 23: Redis Cluster, orders of four lines over eight SKUs on
//! different slots under load, and kill -9 of the api (twice) while orders
//! are held line by line: the kill leaves intents `HOLDING` with some lines
//! held. The restarted api's sweeper (any api node's would) undoes them
//! within `orders.hold_timeout_ms` plus a sweep; no line stays held, every
//! acknowledged order is whole in MySQL, the audits are clean.

use std::time::{Duration, Instant};

use super::orders::{self, open_intent_ids};
use super::{cluster, Scenario};

/// `orders.hold_timeout_ms` of this scenario: the default.
const HOLD_TIMEOUT_MS: u64 = 5_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s23_cluster_api_kill9_between_order_line_holds_strands_nothing() {
    let mut sc: Scenario = cluster::begin(
        "s23",
        "Redis Cluster: kill -9 of the api while 4-line orders are held line by line",
    )
    .await;
    let skus: Vec<u64> = (231..=238).collect();
    sc.open_skus(&skus, 3_000, 20).await;
    cluster::print_placement(&sc, &skus).await;
    let load = orders::start(&mut sc, "s23", &skus, 4, 2_000, 24, 20);
    let mut stranded = 0;
    for round in 1..=2 {
        sc.pause(3_000, 1_500).await;
        sc.note(&format!(
            "inject: kill -9 stockd --role api (round {round}; {} orders answered so far)",
            load.answered()
        ));
        sc.stack.kill_role("api");
        let killed = Instant::now();
        let open = open_intent_ids(&sc.stack).await;
        stranded += open.len();
        sc.note(&format!("intents left open by the kill: {}", open.len()));
        sc.pause(500, 500).await;
        sc.stack.start_role("api").await;
        // The aim: a dead api's units back within 10 s; the
        // restart's time counts here (another api node's sweeper would not
        // wait for it).
        let bound = Duration::from_secs(10) + Duration::from_secs(5);
        let closed = orders::wait_intents_closed(&sc.stack, Some(&open), bound).await;
        sc.expect(
            closed.is_some(),
            format!(
                "round {round}: the dead api's {} intents undone {:.1} s after the kill \
                 (hold timeout {HOLD_TIMEOUT_MS} ms, sweep every 1 s, the restart included; \
                 bound {bound:?})",
                open.len(),
                killed.elapsed().as_secs_f64()
            ),
        );
    }
    sc.expect(
        stranded > 0,
        format!("the kills caught orders between line holds ({stranded} intents)"),
    );
    sc.pause(2_000, 1_000).await;
    let placed = load.finish().await;
    orders::finish(sc, &placed).await;
}
