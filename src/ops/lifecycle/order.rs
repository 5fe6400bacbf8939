//! A hold of N lines: a whole order (docs/architecture.md, "Orders"), named
//! by its order id, stored as its `orders` row plus one ledger row per line.
//! The order row decides: it takes the one conditional update (pay and
//! expiry racing have one winner), and every line follows it in the same
//! transaction, so no order is ever half confirmed, half released or half
//! extended. Redis mirrors each line (`finish.lua`, `extend.lua`) and then
//! the order record (`order_mark.lua`, `order_extend.lua`); the record is
//! marked last, so a mark is the proof of the whole decision.
//!
//! Order of arrival never matters: an order the consumer has not applied yet
//! is applied first, whole, from its Redis record, exactly as the consumer
//! would, and told in the same transaction (`ledger::apply_batch_told`,
//! `Telling::InOutbox`: the consumer's late duplicate tells the same body).
//! Another client's order is found nowhere (`NotFound`), judged on the row
//! or, before the consumer applied it, on the Redis record — before anything
//! is applied or moved (an order's client never changes once written, so
//! the unlocked read decides).

use super::hold::{Hold, Located, Locked, OrderHold};
use super::mirror::mirror;
use super::{retried, within_query_bound, LifecycleError, Transition, TRANSITION_RETRIES};
use crate::db::holds::{self, HoldKey, Restore};
use crate::db::ledger::{self, settle, LedgerRow};
use crate::db::orders::{self, OrderRow};
use crate::db::{sku, Conn, Db, DbError, Transaction};
use crate::domain::{extension_lost, Deduction, HoldTerm, RequestId, Requester, ReservationStatus};
use crate::events::{Event, OrderFacts, Outgoing};
use crate::redis::orders::OrderRecord;
use crate::redis::{RedisError, RedisStore};

impl Hold for OrderHold<'_> {
    type Row = OrderRow;
    type Record = OrderRecord;
    const MIRRORS_REJECTION: bool = false;

    async fn row(&self, db: &Db) -> Result<Option<OrderRow>, DbError> {
        db.bounded(async {
            let mut conn = db.conn().await?;
            orders::find(&mut conn, self.order_id).await
        })
        .await
    }

    async fn record(&self, redis: &RedisStore) -> Result<Option<OrderRecord>, RedisError> {
        redis.orders().record(self.order_id).await
    }

    fn proves(record: &OrderRecord) -> (ReservationStatus, u64) {
        (record.status, record.expires_ms)
    }

    /// The record mirrors a lost extension when both are still reserved,
    /// the same admission, and the record's time and count of extensions
    /// are ahead of the row's: the order row and every line move to them.
    async fn reapply_extension(
        &self,
        db: &Db,
        _redis: &RedisStore,
        row: &OrderRow,
        record: &OrderRecord,
    ) -> Result<(), LifecycleError> {
        let in_mysql = HoldTerm::new(row.status, row.reserved_at_ms, row.expires_at_ms);
        let in_redis = HoldTerm::new(record.status, record.created_ms, record.expires_ms);
        let later = extension_lost(in_mysql, in_redis) && record.extensions > row.extensions;
        if later {
            let reapplied = retried(|| restore_extension(db, row, record));
            within_query_bound(db, reapplied).await?;
        }
        Ok(())
    }

    async fn lock<'c>(
        &self,
        conn: &'c mut Conn,
        db: &Db,
        redis: &RedisStore,
        requester: &Requester,
        _release_as: Transition,
        _now_ms: u64,
    ) -> Result<Located<'c, OrderRow>, LifecycleError> {
        let order_id = self.order_id;
        let unlocked = match orders::find(&mut *conn, order_id).await? {
            Some(row) => row,
            None => {
                if !apply_from_record(db, redis, order_id, requester).await? {
                    return Ok(Located::NotFound);
                }
                let Some(row) = orders::find(&mut *conn, order_id).await? else {
                    return Ok(Located::NotFound);
                };
                row
            }
        };
        if !requester.may_act_on(unlocked.client.as_deref()) {
            return Ok(Located::NotFound);
        }
        let mut tx = conn
            .start_transaction(ledger::tx_opts())
            .await
            .map_err(DbError::from)?;
        let mut out = db.outgoing();
        for line in unlocked.lines.lines() {
            sku::lock_noted(&mut tx, line.sku_id, &mut out).await?;
        }
        let Some(row) = orders::find_for_update(&mut tx, order_id).await? else {
            return Ok(Located::NotFound);
        };
        Ok(Located::Locked(Locked { tx, row, out }))
    }

    async fn finish_locked(
        &self,
        tx: &mut Transaction<'_>,
        order: &OrderRow,
        transition: Transition,
        now_ms: u64,
        out: &mut Outgoing,
    ) -> Result<OrderRow, DbError> {
        let (order_id, target, why) = (self.order_id, transition.target(), transition.reason());
        let mut kind = None;
        for line in order.lines.lines() {
            let row = ledger::find_for_update(tx, line.sku_id, order_id)
                .await?
                .expect("a RESERVED order has a ledger row per line");
            kind = Some(settle::finish_row_locked(tx, &row, target, why, now_ms, out).await?);
        }
        holds::finish_locked(tx, HoldKey::Order(order_id), target, why, now_ms).await?;
        if let Some(kind) = kind.filter(|k| out.wants(k.of_order())) {
            let facts = OrderFacts {
                order_id,
                user_id: order.user_id,
                lines: &order.lines,
                created_ms: order.reserved_at_ms,
                expires_ms: order.expires_at_ms,
            };
            let event = Event::order(kind, &facts, |sku| out.available(sku), why, None, now_ms);
            out.push(event);
        }
        Ok(OrderRow {
            status: target,
            reason: why.map(str::to_string),
            ..order.clone()
        })
    }

    async fn extend_locked(
        &self,
        tx: &mut Transaction<'_>,
        order: &OrderRow,
        by_ms: u64,
        max: u32,
    ) -> Result<Option<(OrderRow, u32)>, DbError> {
        let key = HoldKey::Order(self.order_id);
        if !holds::extend_locked(tx, key, by_ms, max).await? {
            return Ok(None);
        }
        // The row is locked: the count it was read with is the count now.
        let extensions = order.extensions + 1;
        for line in order.lines.lines() {
            let row = ledger::find_for_update(tx, line.sku_id, self.order_id)
                .await?
                .expect("a RESERVED order has a ledger row per line");
            // The lines moved with the order every time, so the order's count bounds them.
            let moved = settle::extend_locked(tx, &row, by_ms, max).await?;
            assert_eq!(moved, Some(extensions), "an order's lines move with it");
        }
        let order = OrderRow {
            expires_at_ms: order.expires_at_ms + by_ms,
            extensions,
            ..order.clone()
        };
        Ok(Some((order, extensions)))
    }

    /// Each line (`finish.lua`, its pending flag cleared), then the record's
    /// mark: marked last, the record proves the whole decision.
    async fn mirror_decided(&self, db: &Db, redis: &RedisStore, order: &OrderRow) {
        for line in line_rows(order) {
            mirror(db, redis, &line).await;
        }
        if let Err(err) = redis.orders().mark(self.order_id, order.status).await {
            crate::health::outage::failed("redis", &err);
        }
    }

    async fn mirror_extension(&self, redis: &RedisStore, order: &OrderRow, extensions: u32) {
        let expires_ms = order.expires_at_ms;
        for line in order.lines.lines() {
            let mirrored = redis
                .reservations()
                .extend(
                    line.sku_id,
                    self.order_id,
                    order.user_id,
                    expires_ms,
                    extensions,
                )
                .await;
            if let Err(err) = mirrored {
                crate::health::outage::failed("redis", &err);
            }
        }
        let record = redis
            .orders()
            .extend_record(self.order_id, expires_ms, extensions);
        if let Err(err) = record.await {
            crate::health::outage::failed("redis", &err);
        }
        metrics::counter!("stockd_order_extensions_total").increment(1);
    }
}

/// Applies the order whole from its Redis record (the consumer is behind),
/// as the consumer would. False when Redis has no record, or it is another
/// client's: nothing applied.
async fn apply_from_record(
    db: &Db,
    redis: &RedisStore,
    order_id: &RequestId,
    requester: &Requester,
) -> Result<bool, LifecycleError> {
    let Some(record) = redis.orders().record(order_id).await? else {
        return Ok(false);
    };
    if !requester.may_act_on(record.client.as_deref()) {
        return Ok(false);
    }
    let lines = Deduction::of_order_by(
        order_id,
        record.user_id,
        &record.lines,
        record.created_ms,
        record.expires_ms,
        record.client.as_deref(),
    );
    let telling = ledger::Telling::InOutbox;
    db.bounded(ledger::apply_batch_told(
        db,
        &lines,
        TRANSITION_RETRIES,
        telling,
    ))
    .await?;
    Ok(true)
}

/// The line rows of a decided order, as its transaction left them (the
/// status and reason of the order, the mirror pending).
fn line_rows(order: &OrderRow) -> Vec<LedgerRow> {
    let client = order.client.as_deref();
    let (created, expires) = (order.reserved_at_ms, order.expires_at_ms);
    let lines = Deduction::of_order_by(
        &order.order_id,
        order.user_id,
        &order.lines,
        created,
        expires,
        client,
    );
    (lines.iter())
        .map(|line| LedgerRow {
            status: order.status,
            reason: order.reason.clone(),
            redis_pending: true,
            ..LedgerRow::rejected(line, "")
        })
        .collect()
}

/// Moves the order row and every line to the record's time and count of
/// extensions, in one transaction under the lock protocol (the SKU rows
/// ascending, then the order row, then the lines). The guards make it a
/// no-op for anything but the lost extension.
async fn restore_extension(
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
    let order = HoldKey::Order(&row.order_id);
    let behind = Restore::Behind(row.reserved_at_ms);
    if !holds::restore_extension(&mut tx, order, expires_ms, extensions, behind).await? {
        return Ok(()); // dropped uncommitted: rolled back
    }
    for line in row.lines.lines() {
        let line = HoldKey::Ledger(line.sku_id, &row.order_id);
        let with_order = Restore::WithItsOrder;
        holds::restore_extension(&mut tx, line, expires_ms, extensions, with_order).await?;
    }
    tx.commit().await.map_err(DbError::from)?;
    metrics::counter!("stockd_lost_decisions_reapplied_total").increment(1);
    tracing::warn!(order.id = %row.order_id,
        "lifecycle: the order record mirrors an extension MySQL does not have (lost by a failover); re-applied it");
    Ok(())
}
