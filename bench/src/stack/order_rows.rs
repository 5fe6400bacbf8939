//! What MySQL must hold after the `orders` phase drained, beyond each SKU's
//! conservation ([`super::check::stores_after_drain`]): one `orders` row per
//! held order, `RESERVED`, and every one of them with exactly one
//! `RESERVED` ledger row per line (`deduct_request_id` = the order id,
//! `order_line` = 1). Why apart from the per-SKU check: the SKUs can each
//! add up while an order is split (one line rejected, another live), and a
//! partial order is the bug the all-or-nothing path exists to rule out.
//!
//! Every child starts from a dropped database; the two phases that place
//! orders (`orders`, `orders_interleaved`) use SKUs and order-id prefixes
//! of their own, so each counts its own orders.

use mysql_async::prelude::Queryable;

use stockd::db::Db;
use stockd::domain::SkuId;

/// Violations of the order rows (empty = green), after the pipeline drained.
/// Only the orders whose id starts with `id_prefix` count (one phase's).
pub async fn after_drain(db: &Db, skus: &[SkuId], id_prefix: &str, held: u64) -> Vec<String> {
    match check(db, skus, id_prefix, held).await {
        Ok(bad) => bad,
        Err(err) => vec![format!("could not read the orders: {err:#}")],
    }
}

async fn check(db: &Db, skus: &[SkuId], id_prefix: &str, held: u64) -> anyhow::Result<Vec<String>> {
    let mut conn = db.conn().await?;
    let in_list = skus
        .iter()
        .map(|s| s.get().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let lines = skus.len() as i64;
    anyhow::ensure!(
        id_prefix.bytes().all(|b| b.is_ascii_alphanumeric()),
        "an order id prefix of letters and digits, rendered into the SQL: {id_prefix:?}"
    );
    let mine = format!("order_id LIKE '{id_prefix}%'");
    let orders: Option<i64> = conn
        .query_first(format!("SELECT COUNT(*) FROM orders WHERE {mine}"))
        .await?;
    let reserved: Option<i64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM orders WHERE {mine} AND status = 'RESERVED'"
        ))
        .await?;
    let line_rows: Option<i64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM stock_deduct_idempotent
              WHERE order_line = 1 AND status = 'RESERVED' AND sku_id IN ({in_list})"
        ))
        .await?;
    // Held orders with exactly one live row per line. A grouped semi-join:
    // the LEFT JOIN of every order to its line rows this replaced ran for
    // minutes over the phase's 32,000 orders (MariaDB scanned the ledger
    // once per order) and stalled the bench.
    let whole: Option<i64> = conn
        .query_first(format!(
            "SELECT COUNT(*) FROM (
               SELECT deduct_request_id FROM stock_deduct_idempotent
                WHERE sku_id IN ({in_list}) AND order_line = 1 AND status = 'RESERVED'
                  AND deduct_request_id IN (SELECT order_id FROM orders WHERE {mine} AND status = 'RESERVED')
                GROUP BY deduct_request_id
               HAVING COUNT(*) = {lines}) AS whole_orders"
        ))
        .await?;
    let held = held as i64;
    let mut bad = Vec::new();
    let mut expect_eq = |what: &str, got: Option<i64>, want: i64| {
        let got = got.unwrap_or(0);
        if got != want {
            bad.push(format!("{what}: {got}, expected {want}"));
        }
    };
    expect_eq("orders rows (== orders held)", orders, held);
    expect_eq("RESERVED orders rows", reserved, held);
    expect_eq(
        "RESERVED order-line ledger rows (== lines × orders held)",
        line_rows,
        lines * held,
    );
    expect_eq(
        "RESERVED orders with exactly one live row per line",
        whole,
        held,
    );
    Ok(bad)
}
