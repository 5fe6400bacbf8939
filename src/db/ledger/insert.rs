//! Multi-row inserts of new ledger rows, rendered as SQL text (`sql_text`: a
//! prepared statement per row count would fill the statement cache).

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::INSERT_CHUNK_ROWS;
use crate::db::sql_text::SqlText;
use crate::db::DbError;
use crate::domain::{Deduction, ReservationStatus};
use crate::events::{Event, EventType, Outgoing};

/// A row to insert.
#[derive(Debug, Clone, Copy)]
pub struct NewRow<'a> {
    pub msg: &'a Deduction,
    pub status: ReservationStatus,
    /// Why a row is not `RESERVED` (a rejection's or a release's reason).
    pub why: Option<&'static str>,
    /// The SKU's available its first telling says (set by [`note_inserted`]
    /// or, for a line, by its order's telling): stored with the row, so a
    /// duplicate tells the same body again (`sql/0008_told_available.sql`).
    pub told_available: Option<i64>,
}

impl<'a> NewRow<'a> {
    pub fn new(msg: &'a Deduction, status: ReservationStatus, why: Option<&'static str>) -> Self {
        Self {
            msg,
            status,
            why,
            told_available: None,
        }
    }
}

/// Multi-row inserts. Plain INSERT, not IGNORE: a duplicate here means another
/// writer broke the lock protocol, and the error makes the batch retry.
/// `REJECTED` rows start with `redis_pending = 1`: Redis must still be told (the
/// quota, and for some reasons the unit, go back), and the closer's sweep
/// retries that mirror until it succeeded.
pub async fn insert_rows(tx: &mut Transaction<'_>, rows: &[NewRow<'_>]) -> Result<(), DbError> {
    for chunk in rows.chunks(INSERT_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "INSERT INTO stock_deduct_idempotent (sku_id, deduct_request_id, user_id,
               deduct_count, status, reason, reserved_at_ms, expires_at_ms, redis_pending,
               order_line, told_available, client)
             VALUES ",
        );
        sql.list(chunk, ",", |s, row| {
            let (msg, status, why) = (row.msg, &row.status, row.why);
            s.raw("(")
                .int(msg.sku_id.get())
                .raw(",")
                .request_id(&msg.request_id)
                .raw(",")
                .int(msg.user_id.get())
                .raw(",")
                .int(msg.count)
                .raw(",")
                .constant(status.as_str())
                .raw(",");
            match why {
                Some(why) => s.constant(why),
                None => s.null(),
            };
            s.raw(",")
                .int(msg.created_ms)
                .raw(",")
                .int(msg.expires_ms)
                .raw(",")
                .int(u8::from(*status == ReservationStatus::Rejected))
                .raw(",")
                .int(u8::from(msg.order.is_some()))
                .raw(",");
            match row.told_available {
                Some(available) => s.int(available),
                None => s.null(),
            };
            s.raw(",");
            // A client's name is configuration, not a request id: sent as
            // the hex of its bytes, as `sql_text` renders anything else.
            match &msg.client {
                Some(client) => s.hex(client.as_bytes()),
                None => s.null(),
            };
            s.raw(")");
        });
        tx.query_drop(sql.finish()).await?;
    }
    Ok(())
}

/// The events of rows just inserted, in order: `persisted` for a `RESERVED`
/// row (its units leave the SKU's available, as `sku::take` took them),
/// `rejected` and `released` with their reason. `available` is the SKU's as
/// the transaction has it after each row (0 for a SKU MySQL does not have).
/// A line of an order moves the stock but is told by its order's event
/// (`apply_order::note_orders`), not as a reservation. Each row keeps the
/// available its event says (`told_available`): call this before
/// [`insert_rows`].
pub fn note_inserted(out: &mut Outgoing, rows: &mut [NewRow<'_>], time_ms: u64) {
    for row in rows {
        let (msg, why) = (row.msg, row.why);
        let kind = match row.status {
            ReservationStatus::Reserved => {
                out.moved(msg.sku_id, -i64::from(msg.count), 0);
                EventType::Persisted
            }
            ReservationStatus::Rejected => EventType::Rejected,
            ReservationStatus::Released => EventType::Released,
            ReservationStatus::Confirmed => EventType::Confirmed,
        };
        if msg.order.is_none() {
            let available = out.available(msg.sku_id).or(Some(0));
            row.told_available = available;
            if out.wants(kind) {
                out.push(Event::reservation(kind, msg, available, why, time_ms));
            }
        }
    }
}
