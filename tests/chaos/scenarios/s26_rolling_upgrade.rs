//! Scenario 26: a rolling upgrade from the previous release (the last
//! commit before orders, [`crate::previous_release`]) to this build, with
//! single reservations and orders in flight, in the order docs/operations.md
//! gives: migrations (this build's, at the stack's start), then the
//! consumers, the closer, then the api nodes one by one.
//!
//! 1. The old api, consumer and closer run the singles load. The old api
//!    never answers for an order: `POST /v1/orders` is a 404 there and
//!    leaves no trace in either store.
//! 2. An upgrade done out of order: a new api node takes orders while only
//!    the old consumer runs. The old consumer cannot read an order's message
//!    (its wire format refuses the unknown `order` field) and dead-letters
//!    it whole with the reason; none of its lines reaches MySQL.
//! 3. The new consumer and closer replace the old ones (SIGTERM, drained);
//!    `stockd dlq replay` hands the dead-lettered orders to the new
//!    consumer, which applies each whole.
//! 4. Orders go on through the new api node while the old api still serves
//!    singles; then the old api is replaced by the new binary on its port.
//!
//! The end: every acknowledged reservation and order in MySQL (orders
//! `RESERVED` whole), nothing dead-lettered, the history check over the
//! singles, the harness audit and `stockd audit` clean.

use std::collections::BTreeSet;
use std::time::Duration;

use super::orders::{self, PlacedOrder};
use super::{plan, Scenario};
use crate::previous_release;

const SKUS: [u64; 4] = [261, 262, 263, 264];
/// Orders placed while only the old consumer runs (step 2).
const EARLY_ORDERS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s26_rolling_upgrade_from_the_previous_release_keeps_every_sale() {
    let old = previous_release::build();
    let mut sc = Scenario::begin(
        "s26",
        "rolling upgrade from the release before orders, with orders in flight",
        &[],
    )
    .await;
    sc.note(&format!(
        "old api, consumer, closer: release {}",
        old.commit
    ));
    for role in ["api", "consumer", "closer"] {
        sc.stack.start_release_role(role, role, Some(&old)).await;
    }
    for sku in SKUS {
        sc.stack.create_sku(sku, 5_000, 60).await;
    }
    let singles = sc.load(plan("s26", &SKUS, 400, 4_000, 50));
    sc.pause(2_000, 500).await;

    let old_base = sc.stack.base.clone();
    let probe = orders::order("s26-old-api", 1, &[(261, 1), (262, 1)]);
    let status = orders::resend(&sc.stack.http, &old_base, &probe).await;
    sc.expect(
        status == 404,
        format!("the old api does not answer for an order (POST /v1/orders: {status})"),
    );

    sc.note("out of order: a new api node takes orders while only the old consumer runs");
    sc.stack.start_role_as("api2", "api").await;
    let new_base = sc.stack.base_of("api2");
    let mut early = Vec::new();
    for n in 0..EARLY_ORDERS {
        let mut order = orders::order(
            &format!("s26-early-{n}"),
            500 + n as u64,
            &[(261, 1), (263, 2), (264, 1)],
        );
        order.status = orders::resend(&sc.stack.http, &new_base, &order).await;
        early.push(order);
    }
    let statuses: Vec<u16> = early.iter().map(|o| o.status).collect();
    sc.expect(
        statuses.iter().all(|s| matches!(s, 201 | 202)),
        format!("the new api node accepts orders ({statuses:?})"),
    );
    let dlq = sc.stack.topology.deduct_dlq.clone();
    let stack = &sc.stack;
    let dead_lettered = sc
        .wait_for(
            "the old consumer dead-lettered the orders",
            Duration::from_secs(30),
            || async { stack.rabbit.ready(&dlq).await.unwrap_or(0) > 0 },
        )
        .await;
    sc.expect(
        dead_lettered,
        "the old consumer dead-letters an order's message".into(),
    );
    let early_ids: BTreeSet<String> = early.iter().map(|o| o.order_id.clone()).collect();
    let in_mysql = orders::order_ids_in_mysql(&sc.stack).await;
    let lines = order_line_rows(&sc, &early_ids).await;
    sc.expect(
        in_mysql.intersection(&early_ids).count() == 0 && lines == 0,
        format!(
            "the old consumer applied none of them ({} order rows, {lines} ledger rows)",
            in_mysql.intersection(&early_ids).count()
        ),
    );
    let listing = sc.stack.cli(&["dlq", "list"]).await;
    sc.note(&format!("stockd dlq list:\n{}", listing.text().trim_end()));
    // The old release's reason is its decoder's last error (the batch
    // form's), not the field it refused: "poison: unknown field …".
    sc.expect(
        listing.text().contains("poison: unknown field"),
        "the dead letter says why (a wire format the old consumer does not read)".into(),
    );
    sc.expect(
        listing.text().contains("order: 261x1 263x2 264x1"),
        "stockd dlq list shows every line of a dead-lettered order".into(),
    );

    sc.note("upgrade the consumer: the new one starts, the old one drains and stops");
    sc.stack.start_role_as("consumer2", "consumer").await;
    sc.stack.stop_role("consumer");
    sc.note("upgrade the closer");
    sc.stack.start_role_as("closer2", "closer").await;
    sc.stack.stop_role("closer");
    let replay = sc.stack.cli(&["dlq", "replay"]).await;
    sc.note(&format!("stockd dlq replay:\n{}", replay.text().trim_end()));
    sc.expect(replay.code == Some(0), "stockd dlq replay succeeds".into());
    let stack = &sc.stack;
    let early_applied = sc
        .wait_for(
            "the replayed orders applied",
            Duration::from_secs(30),
            || async {
                let ids = orders::order_ids_in_mysql(stack).await;
                early_ids.iter().all(|id| ids.contains(id))
            },
        )
        .await;
    sc.expect(
        early_applied,
        "the new consumer applies the replayed orders".into(),
    );

    sc.note("orders through the new api node while the old api serves singles");
    let order_load = orders::start_on(&mut sc, &new_base, "s26", &SKUS, 3, 600, 6, 20);
    sc.pause(4_000, 1_000).await;
    sc.note("upgrade the old api: SIGTERM, then this build on its port");
    sc.stack.stop_role("api");
    sc.stack.start_role("api").await;
    sc.pause(3_000, 1_000).await;
    singles.stop_sending();
    let report = singles.finish().await;
    let mut placed: Vec<PlacedOrder> = order_load.finish().await;
    placed.extend(early);
    let cut = report.answers.iter().filter(|a| a.status == 0).count();
    sc.note(&format!(
        "single requests cut by the api's restart (no answer): {cut}"
    ));
    let errors = report
        .answers
        .iter()
        .filter(|a| a.status >= 500 && a.status != 503)
        .count();
    sc.expect(errors == 0, format!("no 5xx other than 503 ({errors})"));
    let left = sc.stack.rabbit.ready(&sc.stack.topology.deduct_dlq).await;
    sc.expect(
        matches!(left, Some(0) | None),
        format!("nothing left dead-lettered ({left:?})"),
    );
    orders::finish_with_singles(sc, &placed, Some(&report)).await;
}

/// Ledger rows of the orders `ids` (any SKU).
async fn order_line_rows(sc: &Scenario, ids: &BTreeSet<String>) -> usize {
    use mysql_async::prelude::Queryable;
    let mut db = sc.stack.db().await;
    let rids: Vec<String> = db
        .query("SELECT deduct_request_id FROM stock_deduct_idempotent")
        .await
        .unwrap();
    let _ = db.disconnect().await;
    rids.iter().filter(|rid| ids.contains(*rid)).count()
}
