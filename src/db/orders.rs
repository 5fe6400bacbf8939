//! The `orders` table (`sql/0007_orders.sql`): one row per order the
//! consumer applied, holding the order's own state. Its lines are ledger rows
//! (`ledger`, `order_line = 1`); `ops::lifecycle` decides an order's
//! transitions over both under the ledger lock protocol (`lifecycle::order`),
//! with the statements every hold shares (`db::holds`: finish, extend,
//! restore an extension, the sweep's search).

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::DbError;
use crate::domain::{OrderLines, RequestId, ReservationStatus, UserId};

/// An order row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRow {
    pub order_id: RequestId,
    pub user_id: UserId,
    pub lines: OrderLines,
    pub status: ReservationStatus,
    pub reason: Option<String>,
    pub reserved_at_ms: u64,
    pub expires_at_ms: u64,
    /// Extensions of the time to pay granted so far (`POST .../extend`).
    pub extensions: u32,
    /// The client that placed it (`sql/0010_hold_client.sql`); none: an
    /// order of no one.
    pub client: Option<String>,
}

type RawOrder = (
    String,
    u64,
    String,
    String,
    Option<String>,
    u64,
    u64,
    u32,
    Option<String>,
);

const ORDER_COLUMNS: &str = "order_id, user_id, order_lines, status, reason, reserved_at_ms,
    expires_at_ms, extensions, client";

/// Every value went through the domain's parsers on its way in (as for the
/// ledger): one that does not parse back is a programmer error.
fn from_raw(raw: RawOrder) -> OrderRow {
    OrderRow {
        order_id: RequestId::parse(&raw.0).expect("valid order id in orders"),
        user_id: UserId::new(raw.1).expect("valid user id in orders"),
        lines: OrderLines::decode(&raw.2).expect("valid lines in orders"),
        status: ReservationStatus::parse(&raw.3).expect("valid status in orders"),
        reason: raw.4,
        reserved_at_ms: raw.5,
        expires_at_ms: raw.6,
        extensions: raw.7,
        client: raw.8,
    }
}

/// One order row, without locking.
pub async fn find<Q: Queryable>(
    q: &mut Q,
    order_id: &RequestId,
) -> Result<Option<OrderRow>, DbError> {
    let raw: Option<RawOrder> = q
        .exec_first(
            format!("SELECT {ORDER_COLUMNS} FROM orders WHERE order_id = ?"),
            (order_id.as_str(),),
        )
        .await?;
    Ok(raw.map(from_raw))
}

/// One order row, locked (take its SKU rows first: the ledger lock protocol).
pub async fn find_for_update(
    tx: &mut Transaction<'_>,
    order_id: &RequestId,
) -> Result<Option<OrderRow>, DbError> {
    let raw: Option<RawOrder> = tx
        .exec_first(
            format!("SELECT {ORDER_COLUMNS} FROM orders WHERE order_id = ? FOR UPDATE"),
            (order_id.as_str(),),
        )
        .await?;
    Ok(raw.map(from_raw))
}

/// An order as the invariant check reads it: the row's lines and status,
/// and the status of each ledger row marked as one of its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderAudit {
    pub order_id: String,
    pub lines: OrderLines,
    pub status: ReservationStatus,
    /// `(sku_id, status)` of each `order_line = 1` ledger row of the order.
    pub line_rows: Vec<(u64, String)>,
}

/// What the invariant check reads of orders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrdersAudit {
    pub orders: Vec<OrderAudit>,
    /// `(order_id, sku_id, status)` of line rows whose order has no row.
    pub orphan_lines: Vec<(String, u64, String)>,
}

/// Every order row with its line rows, in one consistent snapshot `q` (two
/// scans, grouped here: the ledger has no index on the request id alone).
pub async fn audit_all<Q: Queryable>(q: &mut Q) -> Result<OrdersAudit, DbError> {
    let rows: Vec<(String, String, String)> = q
        .query("SELECT order_id, order_lines, status FROM orders ORDER BY order_id")
        .await?;
    let lines: Vec<(String, u64, String)> = q
        .query(
            "SELECT deduct_request_id, sku_id, status FROM stock_deduct_idempotent
             WHERE order_line = 1",
        )
        .await?;
    let mut by_order: std::collections::HashMap<String, Vec<(u64, String)>> =
        std::collections::HashMap::new();
    for (order_id, sku_id, status) in lines {
        by_order.entry(order_id).or_default().push((sku_id, status));
    }
    let orders = rows
        .into_iter()
        .map(|(order_id, lines, status)| OrderAudit {
            line_rows: by_order.remove(&order_id).unwrap_or_default(),
            lines: OrderLines::decode(&lines).expect("valid lines in orders"),
            status: ReservationStatus::parse(&status).expect("valid status in orders"),
            order_id,
        })
        .collect();
    let mut orphan_lines: Vec<(String, u64, String)> = by_order
        .into_iter()
        .flat_map(|(id, rows)| rows.into_iter().map(move |(s, st)| (id.clone(), s, st)))
        .collect();
    orphan_lines.sort();
    Ok(OrdersAudit {
        orders,
        orphan_lines,
    })
}
