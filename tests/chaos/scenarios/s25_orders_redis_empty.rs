//! Scenario 25: Redis restarts EMPTY (every acknowledged write lost) while
//! orders are live, under a load of 3-line orders. `stockd warmup` rebuilds
//! the SKUs, every live line record and every buyer's units from the
//! ledger (not the order records: MySQL has the orders). After it an
//! acknowledged order's retry is a replay (200, answered from MySQL's order
//! row), its cancel gives every line back in both stores, a second load of
//! orders is held whole, and the audits are clean.

use std::time::Duration;

use super::orders;
use super::Scenario;
use crate::stores;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s25_redis_restarted_empty_with_orders_live_then_warmup_keeps_them_whole() {
    let mut sc = Scenario::begin(
        "s25",
        "Redis restarted empty with orders live, warm-up",
        &[],
    )
    .await;
    let skus: Vec<u64> = (251..=254).collect();
    sc.open_skus(&skus, 2_000, 20).await;
    let load = orders::start(&mut sc, "s25a", &skus, 3, 500, 12, 20);
    sc.pause(3_000, 1_500).await;
    sc.note("inject: kill -9 redis-server, delete its data, start it empty");
    sc.stack.redis_mut().restart_empty().await;
    sc.pause(1_000, 500).await;
    let mut placed = load.finish().await;
    // As an operator does (docs/operations.md, warm-up): let the consumer
    // apply what the broker holds first, then rebuild Redis from the ledger.
    let acknowledged: Vec<String> = placed
        .iter()
        .filter(|o| o.status == 201)
        .map(|o| o.order_id.clone())
        .collect();
    let stack = &sc.stack;
    let applied = sc
        .wait_for(
            "every acknowledged order in MySQL",
            Duration::from_secs(60),
            || async {
                let ids = orders::order_ids_in_mysql(stack).await;
                acknowledged.iter().all(|id| ids.contains(id))
            },
        )
        .await;
    sc.expect(applied, "the acknowledged orders reached MySQL".into());
    let mut rows = stores::ledger_len(&sc.stack).await;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = stores::ledger_len(&sc.stack).await;
        if now == rows {
            break;
        }
        rows = now;
    }
    let args: Vec<String> = skus
        .iter()
        .flat_map(|s| ["--sku".to_string(), s.to_string()])
        .collect();
    let args: Vec<&str> = std::iter::once("warmup")
        .chain(args.iter().map(String::as_str))
        .collect();
    sc.note(&format!("stockd {}", args.join(" ")));
    let warm = sc.stack.cli(&args).await;
    print!("{}", warm.text());
    sc.expect(
        warm.code == Some(0),
        format!("warmup exit code {:?}", warm.code),
    );

    let acknowledged: Vec<orders::PlacedOrder> =
        placed.iter().filter(|o| o.status == 201).cloned().collect();
    let client = reqwest::Client::new();
    if let Some(first) = acknowledged.first() {
        let replay = orders::resend(&client, &sc.stack.base, first).await;
        sc.expect(
            replay == 200,
            format!(
                "a retry of acknowledged order {} after the loss: {replay} (200)",
                first.order_id
            ),
        );
        let cancel = client
            .post(format!(
                "{}/v1/orders/{}/cancel",
                sc.stack.base, first.order_id
            ))
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0);
        sc.expect(
            cancel == 200,
            format!("its cancel after the warm-up: {cancel} (200)"),
        );
        // Cancelled now: the closing checks expect RESERVED of the others.
        placed.retain(|o| o.order_id != first.order_id);
    }
    sc.note("a second load of orders on the warmed-up Redis");
    let again = orders::start(&mut sc, "s25b", &skus, 3, 500, 12, 20);
    sc.pause(3_000, 1_000).await;
    placed.extend(again.finish().await);
    orders::finish(sc, &placed).await;
}
