//! A hold's statements, written once for both of the tables a hold is kept
//! in: a single reservation is its ledger row, an order its `orders` row
//! (whose lines are ledger rows too). The statements that decide a hold —
//! the `RESERVED` → final-state update, the extension of its time to pay,
//! the restoring of an extension MySQL lost, and the sweep's searches for
//! holds past their time — do the same thing to either table; what differs
//! is said once per table in a [`HoldTable`] (its name, the columns naming a
//! row, what else a finish sets, which of its rows a sweep releases alone).
//!
//! The callers (`ledger::settle`, `ops::lifecycle`, `ops::sweep`) keep the
//! ledger lock protocol: the SKU rows first, ascending, then the row that
//! decides, then the lines. Every statement names its rows by the table's
//! key (the primary key) or searches by `status` and `expires_at_ms` (the
//! index `idx_status_expiry` / `idx_orders_status_expiry`), as each table's
//! own statements did.

use mysql_async::prelude::Queryable;
use mysql_async::{Transaction, Value};

use super::due::DUE;
use super::sql_text::SqlText;
use super::DbError;
use crate::domain::{RequestId, ReservationStatus, SkuId};

/// What the statements need to know of a table that keeps holds.
#[derive(Debug)]
pub struct HoldTable {
    table: &'static str,
    /// The column holding a hold's id (a request id, an order id).
    id: &'static str,
    /// The predicate naming one row: its primary key, with placeholders.
    key: &'static str,
    /// What a finish sets besides the status, reason and time.
    finish_also: &'static str,
    /// What a row must also be for a sweep to release it on its own.
    swept_alone: &'static str,
}

/// The ledger: a single reservation, or a line of an order.
pub const LEDGER: HoldTable = HoldTable {
    table: "stock_deduct_idempotent",
    id: "deduct_request_id",
    key: "sku_id = ? AND deduct_request_id = ?",
    // The Redis mirror is due (`ops::lifecycle::mirror`, the sweep's retry).
    finish_also: ", redis_pending = 1",
    // A line is released with its whole order, never alone
    // (docs/architecture.md, "Orders").
    swept_alone: " AND order_line = 0",
};

/// The `orders` table (`sql/0007_orders.sql`): an order's own state.
pub const ORDERS: HoldTable = HoldTable {
    table: "orders",
    id: "order_id",
    key: "order_id = ?",
    // Each line's ledger row carries the mirror flag, not the order row.
    finish_also: "",
    swept_alone: "",
};

impl HoldTable {
    /// The predicate of this table's holds due for release by the bound
    /// clock (`{DUE}`), one placeholder: the clock.
    fn due(&self) -> String {
        format!("status = 'RESERVED' AND {DUE}{}", self.swept_alone)
    }
}

/// One row of a hold, by its table's primary key.
#[derive(Debug, Clone, Copy)]
pub enum HoldKey<'a> {
    /// A ledger row by SKU and request id: a single reservation, or one
    /// line of an order (whose request id is the order id).
    Ledger(SkuId, &'a RequestId),
    /// An order row.
    Order(&'a RequestId),
}

impl HoldKey<'_> {
    fn table(&self) -> &'static HoldTable {
        match self {
            HoldKey::Ledger(..) => &LEDGER,
            HoldKey::Order(_) => &ORDERS,
        }
    }

    /// `head`'s values, then the key's (the order of [`HoldTable::key`]),
    /// then `tail`'s.
    fn params(&self, head: Vec<Value>, tail: Vec<Value>) -> Vec<Value> {
        let mut params = head;
        match self {
            HoldKey::Ledger(sku_id, request_id) => {
                params.push(sku_id.get().into());
                params.push(request_id.as_str().into());
            }
            HoldKey::Order(order_id) => params.push(order_id.as_str().into()),
        }
        params.extend(tail);
        params
    }
}

/// The conditional update of a locked `RESERVED` row to its final state.
/// The row is locked and was `RESERVED`: anything but one row is a bug.
pub async fn finish_locked(
    tx: &mut Transaction<'_>,
    key: HoldKey<'_>,
    target: ReservationStatus,
    why: Option<&str>,
    now_ms: u64,
) -> Result<(), DbError> {
    let t = key.table();
    let sql = format!(
        "UPDATE {} SET status = ?, reason = ?, finished_at_ms = ?{}
         WHERE {} AND status = 'RESERVED'",
        t.table, t.finish_also, t.key
    );
    let head = vec![target.as_str().into(), why.into(), now_ms.into()];
    tx.exec_drop(sql, key.params(head, Vec::new())).await?;
    assert_eq!(tx.affected_rows(), 1, "the row is locked and was RESERVED");
    Ok(())
}

/// [`finish_locked`] of many ledger rows of one SKU (single reservations,
/// all locked and `RESERVED`) in one statement, sent as text
/// (`db::sql_text`: one statement whatever the number of ids).
pub async fn finish_many_locked(
    tx: &mut Transaction<'_>,
    sku_id: SkuId,
    ids: &[&RequestId],
    target: ReservationStatus,
    why: Option<&'static str>,
    now_ms: u64,
) -> Result<(), DbError> {
    let t = &LEDGER;
    let mut sql = SqlText::new(&format!("UPDATE {} SET status = ", t.table));
    sql.constant(target.as_str()).raw(", reason = ");
    match why {
        Some(why) => sql.constant(why),
        None => sql.null(),
    };
    sql.raw(", finished_at_ms = ")
        .int(now_ms)
        .raw(t.finish_also)
        .raw(" WHERE sku_id = ")
        .int(sku_id.get())
        .raw(" AND status = 'RESERVED' AND ")
        .raw(t.id)
        .raw(" IN (")
        .request_ids(ids.iter().copied())
        .raw(")");
    tx.query_drop(sql.finish()).await?;
    assert_eq!(
        tx.affected_rows(),
        ids.len() as u64,
        "the rows are locked and were RESERVED"
    );
    Ok(())
}

/// Moves a locked `RESERVED` row's `expires_at_ms` by `by_ms`, unless it had
/// `max` extensions already. Whether it moved: the row is locked (ledger
/// lock protocol), so only the count can refuse it.
pub async fn extend_locked(
    tx: &mut Transaction<'_>,
    key: HoldKey<'_>,
    by_ms: u64,
    max: u32,
) -> Result<bool, DbError> {
    let t = key.table();
    let sql = format!(
        "UPDATE {} SET expires_at_ms = expires_at_ms + ?, extensions = extensions + 1
         WHERE {} AND status = 'RESERVED' AND extensions < ?",
        t.table, t.key
    );
    let params = key.params(vec![by_ms.into()], vec![max.into()]);
    tx.exec_drop(sql, params).await?;
    Ok(tx.affected_rows() == 1)
}

/// Which rows an extension's restoring moves.
#[derive(Debug, Clone, Copy)]
pub enum Restore {
    /// The row that decides, only when it is the same admission (its
    /// `reserved_at_ms` is this one, the time the Redis proof was created)
    /// and behind the proof: fewer extensions and an earlier time. Anything
    /// else is a no-op, so the update needs no lock.
    Behind(u64),
    /// A line of an order, in the transaction whose restoring of the order
    /// row (its guards) decided it.
    WithItsOrder,
}

/// Moves a `RESERVED` row to the time and count of extensions its Redis
/// mirror proves (MySQL lost the commit of the difference), as `restore`
/// says. Whether it moved.
pub async fn restore_extension<Q: Queryable>(
    q: &mut Q,
    key: HoldKey<'_>,
    expires_at_ms: u64,
    extensions: u32,
    restore: Restore,
) -> Result<bool, DbError> {
    let t = key.table();
    let head = vec![expires_at_ms.into(), extensions.into()];
    let (guard, tail) = match restore {
        Restore::Behind(reserved_at_ms) => (
            " AND reserved_at_ms = ?
               AND extensions < ? AND expires_at_ms < ?",
            vec![
                reserved_at_ms.into(),
                extensions.into(),
                expires_at_ms.into(),
            ],
        ),
        Restore::WithItsOrder => ("", Vec::new()),
    };
    let sql = format!(
        "UPDATE {} SET expires_at_ms = ?, extensions = ?
         WHERE {} AND status = 'RESERVED'{guard}",
        t.table, t.key
    );
    // On a connection (a single's, no lock needed) or in a transaction (an
    // order's, its lines following): the result says what moved.
    let result = q.exec_iter(sql, key.params(head, tail)).await?;
    let moved = result.affected_rows() == 1;
    result.drop_result().await?;
    Ok(moved)
}

/// The holds a sweep searches for those past their time.
#[derive(Debug, Clone, Copy)]
pub enum Search {
    /// One SKU's single reservations (its order lines left out).
    Singles(SkuId),
    /// Every order.
    Orders,
}

impl Search {
    /// The `WHERE` predicate of the holds due by the bound clock, and its
    /// values with `cutoff_ms`.
    pub fn due(&self, cutoff_ms: u64) -> (String, Vec<Value>) {
        match self {
            Search::Singles(sku_id) => (
                format!("sku_id = ? AND {}", LEDGER.due()),
                vec![sku_id.get().into(), cutoff_ms.into()],
            ),
            Search::Orders => (ORDERS.due(), vec![cutoff_ms.into()]),
        }
    }

    fn table(&self) -> &'static HoldTable {
        match self {
            Search::Singles(_) => &LEDGER,
            Search::Orders => &ORDERS,
        }
    }
}

/// Ids of the `search`ed holds due before `cutoff_ms`, at most `limit`, oldest
/// first, without locking them: a single's Redis mirror is checked for a
/// confirm MySQL lost first, an order is released whole by its transition
/// (`ops::sweep`).
pub async fn expired_ids<Q: Queryable>(
    q: &mut Q,
    search: Search,
    cutoff_ms: u64,
    limit: usize,
) -> Result<Vec<String>, DbError> {
    let (due, params) = search.due(cutoff_ms);
    let t = search.table();
    let sql = format!(
        "SELECT {} FROM {} WHERE {due} ORDER BY expires_at_ms LIMIT {limit}",
        t.id, t.table
    );
    Ok(q.exec(sql, params).await?)
}

/// SKUs holding single reservations due before `cutoff_ms`, at most `limit`
/// (the sweep's first search; its orders are searched by [`Search::Orders`]).
pub async fn skus_with_expired<Q: Queryable>(
    q: &mut Q,
    cutoff_ms: u64,
    limit: usize,
) -> Result<Vec<u64>, DbError> {
    let sql = format!(
        "SELECT DISTINCT sku_id FROM {} WHERE {} LIMIT {limit}",
        LEDGER.table,
        LEDGER.due()
    );
    Ok(q.exec(sql, (cutoff_ms,)).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep's searches keep their index's columns and leave order lines
    /// out of the ledger's.
    #[test]
    fn the_due_predicates_name_the_status_and_time_and_the_kind() {
        let sku = SkuId::new(7).unwrap();
        let (singles, values) = Search::Singles(sku).due(100);
        let due = format!("status = 'RESERVED' AND {DUE}");
        assert_eq!(singles, format!("sku_id = ? AND {due} AND order_line = 0"));
        assert_eq!(values, vec![Value::from(7u64), Value::from(100u64)]);
        let (orders, values) = Search::Orders.due(100);
        assert_eq!(orders, due);
        assert_eq!(values, vec![Value::from(100u64)]);
    }

    /// A key's values sit where its table's key names them.
    #[test]
    fn a_keys_values_sit_between_the_heads_and_the_tails() {
        let id = RequestId::parse("r-1").unwrap();
        let sku_id = SkuId::new(3).unwrap();
        let line = HoldKey::Ledger(sku_id, &id);
        assert_eq!(
            line.params(vec![1u64.into()], vec![2u64.into()]),
            vec![
                Value::from(1u64),
                Value::from(3u64),
                Value::from("r-1"),
                Value::from(2u64)
            ]
        );
        let order = HoldKey::Order(&id);
        assert_eq!(
            order.params(Vec::new(), vec![2u64.into()]),
            vec![Value::from("r-1"), Value::from(2u64)]
        );
        assert_eq!(line.table().key.matches('?').count(), 2);
        assert_eq!(order.table().key.matches('?').count(), 1);
    }
}
