//! Order decisions MySQL lost that Redis proves (docs/operations.md, "MySQL
//! failover"), as `recovered` does for single reservations. An order's
//! record is marked CONFIRMED or RELEASED (`order_mark.lua`) only after
//! MySQL committed that decision, so a marked record whose order row is
//! still RESERVED is a decision MySQL made and then lost with a failover to
//! a lagging replica: any transition asked of the order re-applies it first
//! (a paid order is never released by its expiry), and the reconciler's
//! repair of `MYSQL_BEHIND` re-applies lost orders whole, as orders
//! ([`reapply_lost`]), never their lines as single reservations. The same
//! for an extension: a RESERVED record of the same admission with a later
//! time and more extensions than the order row is an extension MySQL lost,
//! and an expiry re-applies it (to the order row and every line) instead of
//! releasing an order the buyer was told is held.
//!
//! The proof is the order record: its lines are mirrored before it, so a
//! mark that failed (Redis unreachable right after the commit) leaves a
//! record that proves nothing, and MySQL's state stands.

use super::order::{applied_or_applies, transition_order};
use super::recovered::release_of;
use super::{retried, LifecycleError, Transition};
use crate::db::ledger::{self, settle};
use crate::db::orders::{self, OrderRow};
use crate::db::{sku, Db, DbError};
use crate::domain::{RequestId, Requester, ReservationStatus};
use crate::redis::orders::OrderRecord;
use crate::redis::RedisStore;

/// The transition to apply for `asked`: the decision the order record
/// proves when MySQL's order row is still RESERVED, else `asked`. `known`
/// is the row the caller read already (`None`: read it here). A confirm
/// or cancel does not wait for Redis (without the record nothing is
/// proven); an expiry does (the closer retries it), since releasing
/// unchecked could free a paid order.
pub(super) async fn proven_transition(
    db: &Db,
    redis: &RedisStore,
    order_id: &RequestId,
    known: Option<OrderRow>,
    asked: Transition,
    now_ms: u64,
) -> Result<Transition, LifecycleError> {
    let row = match known {
        Some(row) => Some(row),
        None => {
            db.bounded(async {
                let mut conn = db.conn().await?;
                orders::find(&mut conn, order_id).await
            })
            .await?
        }
    };
    if row
        .as_ref()
        .is_none_or(|r| r.status != ReservationStatus::Reserved)
    {
        return Ok(asked); // MySQL decided already (or has no order): it stands
    }
    let record = match redis.orders().record(order_id).await {
        Ok(record) => record,
        Err(err) if asked != Transition::Expire => {
            tracing::debug!(error = %err, "lifecycle: order record not read before a confirm or cancel");
            return Ok(asked);
        }
        Err(err) => return Err(err.into()),
    };
    if let (Transition::Expire, Some(row), Some(record)) = (asked, &row, &record) {
        if later_in_redis(row, record) {
            let reapplied = retried(|| reapply_extension(db, row, record));
            super::within_query_bound(db, reapplied).await?;
            // The decision reads the order row again: the later time, if re-applied.
        }
    }
    let proven = match record.map(|r| (r.status, r.expires_ms)) {
        Some((ReservationStatus::Confirmed, _)) => Transition::Confirm,
        Some((ReservationStatus::Released, expires_ms)) => {
            release_of(Some(expires_ms), asked, now_ms)
        }
        _ => return Ok(asked),
    };
    if proven != asked {
        metrics::counter!("stockd_lost_decisions_reapplied_total").increment(1);
        tracing::warn!(order.id = %order_id, asked = ?asked, reapplied = ?proven,
            "lifecycle: the order record mirrors a decision MySQL does not have (lost by a failover); re-applying it");
    }
    Ok(proven)
}

/// Whether the order record mirrors an extension MySQL lost: both still
/// reserved, the same admission, and the record's time and count of
/// extensions ahead of the row's.
fn later_in_redis(row: &OrderRow, record: &OrderRecord) -> bool {
    row.status == ReservationStatus::Reserved
        && record.status == ReservationStatus::Reserved
        && record.created_ms == row.reserved_at_ms
        && record.expires_ms > row.expires_at_ms
        && record.extensions > row.extensions
}

/// Moves the order row and every line to the record's time and count of
/// extensions, in one transaction under the order lock protocol (the SKU
/// rows ascending, then the order row, then the lines). The guards make it
/// a no-op for anything but the lost extension.
async fn reapply_extension(
    db: &Db,
    row: &OrderRow,
    record: &OrderRecord,
) -> Result<(), LifecycleError> {
    let mut conn = db.conn().await?;
    let mut tx = conn
        .start_transaction(ledger::tx_opts())
        .await
        .map_err(DbError::from)?;
    for line in row.lines.lines() {
        sku::lock(&mut tx, line.sku_id).await?;
    }
    let (expires_ms, extensions) = (record.expires_ms, record.extensions);
    if !orders::restore_extension_locked(&mut tx, row, expires_ms, extensions).await? {
        return Ok(()); // dropped uncommitted: rolled back
    }
    for line in row.lines.lines() {
        let (sku_id, order_id) = (line.sku_id, &row.order_id);
        settle::restore_line_extension(&mut tx, sku_id, order_id, expires_ms, extensions).await?;
    }
    tx.commit().await.map_err(DbError::from)?;
    metrics::counter!("stockd_lost_decisions_reapplied_total").increment(1);
    tracing::warn!(order.id = %row.order_id,
        "lifecycle: the order record mirrors an extension MySQL does not have (lost by a failover); re-applied it");
    Ok(())
}

/// The reconciler's repair of an order MySQL lost, found through one of its
/// lines (`proven` is that line's Redis status): applies the order whole
/// from its record when MySQL lacks it (exactly as the consumer would), then
/// the decision the line proves. False when Redis no longer has the order
/// record (nothing can be proven); a repeat when already done.
pub async fn reapply_lost(
    db: &Db,
    redis: &RedisStore,
    order_id: &RequestId,
    proven: ReservationStatus,
    now_ms: u64,
) -> Result<bool, LifecycleError> {
    let Some(record) = redis.orders().record(order_id).await? else {
        return Ok(false);
    };
    if !applied_or_applies(db, redis, order_id, &Requester::Anyone).await? {
        return Ok(false);
    }
    let transition = match proven {
        ReservationStatus::Confirmed => Transition::Confirm,
        ReservationStatus::Released => {
            release_of(Some(record.expires_ms), Transition::Confirm, now_ms)
        }
        _ => return Ok(true),
    };
    transition_order(db, redis, order_id, transition, now_ms, &Requester::Anyone).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_record_is_the_release_asked_or_the_one_its_time_says() {
        assert_eq!(
            release_of(Some(10), Transition::Cancel, 5),
            Transition::Cancel
        );
        assert_eq!(
            release_of(Some(10), Transition::Expire, 50),
            Transition::Expire
        );
        assert_eq!(
            release_of(Some(10), Transition::Confirm, 50),
            Transition::Expire
        );
        assert_eq!(
            release_of(Some(10), Transition::Confirm, 5),
            Transition::Cancel
        );
    }
}
