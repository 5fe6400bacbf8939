//! A hold of one line: a single reservation, named by its SKU and request
//! id, stored as its ledger row. The row decides and is the only line; its
//! lock step is `locate`, its mirror `finish.lua` on its one record.

use super::hold::{Hold, Located, SingleHold};
use super::mirror::mirror_then_clear_later;
use super::{locate, LifecycleError, Transition};
use crate::db::holds::{self, HoldKey, Restore};
use crate::db::ledger::{self, settle, LedgerRow};
use crate::db::{Conn, Db, DbError, Transaction};
use crate::domain::{extension_lost, HoldTerm, Requester, Reservation, ReservationStatus};
use crate::events::Outgoing;
use crate::redis::{RedisError, RedisStore};

impl Hold for SingleHold<'_> {
    type Row = LedgerRow;
    type Record = Reservation;
    const MIRRORS_REJECTION: bool = true;

    async fn row(&self, db: &Db) -> Result<Option<LedgerRow>, DbError> {
        db.bounded(async {
            let mut conn = db.conn().await?;
            ledger::find(&mut conn, self.sku_id, self.request_id).await
        })
        .await
    }

    async fn record(&self, redis: &RedisStore) -> Result<Option<Reservation>, RedisError> {
        let records = redis.reservations();
        records.reservation(self.sku_id, self.request_id).await
    }

    fn proves(record: &Reservation) -> (ReservationStatus, u64) {
        (record.status, record.expires_at_ms)
    }

    /// The proof is the record's count of extensions (`ext`), read only when
    /// the record is the same admission (a readmitted record has another
    /// creation time, and its later time is no extension) with a later time.
    async fn reapply_extension(
        &self,
        db: &Db,
        redis: &RedisStore,
        row: &LedgerRow,
        record: &Reservation,
    ) -> Result<(), LifecycleError> {
        let in_mysql = HoldTerm::new(row.status, row.reserved_at_ms, row.expires_at_ms);
        let in_redis = HoldTerm::new(record.status, record.created_at_ms, record.expires_at_ms);
        if !extension_lost(in_mysql, in_redis) {
            return Ok(());
        }
        let reservations = redis.reservations();
        let mirrored = reservations
            .mirrored_extensions(self.sku_id, self.request_id, record.user_id)
            .await?;
        if mirrored == 0 {
            return Ok(());
        }
        let reapplied = db
            .bounded(async {
                let mut conn = db.conn().await?;
                let key = HoldKey::Ledger(self.sku_id, self.request_id);
                let behind = Restore::Behind(row.reserved_at_ms);
                let expires_at_ms = record.expires_at_ms;
                holds::restore_extension(&mut conn, key, expires_at_ms, mirrored, behind).await
            })
            .await?;
        if reapplied {
            metrics::counter!("stockd_lost_decisions_reapplied_total").increment(1);
            tracing::warn!(hold = %self,
                "lifecycle: Redis mirrors an extension MySQL does not have (lost by a failover); re-applied it");
        }
        Ok(())
    }

    async fn lock<'c>(
        &self,
        conn: &'c mut Conn,
        db: &Db,
        redis: &RedisStore,
        requester: &Requester,
        release_as: Transition,
        now_ms: u64,
    ) -> Result<Located<'c, LedgerRow>, LifecycleError> {
        locate::lock(conn, db, redis, self, requester, release_as, now_ms).await
    }

    async fn finish_locked(
        &self,
        tx: &mut Transaction<'_>,
        row: &LedgerRow,
        transition: Transition,
        now_ms: u64,
        out: &mut Outgoing,
    ) -> Result<LedgerRow, DbError> {
        let (target, why) = (transition.target(), transition.reason());
        let kind = settle::finish_row_locked(tx, row, target, why, now_ms, out).await?;
        settle::tell(out, kind, row, why, now_ms);
        Ok(LedgerRow {
            status: target,
            reason: why.map(str::to_string),
            redis_pending: true,
            ..row.clone()
        })
    }

    async fn extend_locked(
        &self,
        tx: &mut Transaction<'_>,
        row: &LedgerRow,
        by_ms: u64,
        max: u32,
    ) -> Result<Option<(LedgerRow, u32)>, DbError> {
        let moved = settle::extend_locked(tx, row, by_ms, max).await?;
        Ok(moved.map(|extensions| {
            let expires_at_ms = row.expires_at_ms + by_ms;
            let row = LedgerRow {
                expires_at_ms,
                ..row.clone()
            };
            (row, extensions)
        }))
    }

    async fn mirror_decided(&self, db: &Db, redis: &RedisStore, row: &LedgerRow) {
        mirror_then_clear_later(db, redis, row).await;
    }

    async fn mirror_extension(&self, redis: &RedisStore, row: &LedgerRow, extensions: u32) {
        let (sku_id, request_id) = (self.sku_id, self.request_id);
        let mirrored = redis
            .reservations()
            .extend(
                sku_id,
                request_id,
                row.user_id,
                row.expires_at_ms,
                extensions,
            )
            .await;
        if let Err(err) = mirrored {
            // Without the mirror, a failover that loses this commit has no
            // proof to re-apply it from (`recovered`).
            crate::health::outage::failed("redis", &err);
        }
        metrics::counter!("stockd_reservation_extensions_total").increment(1);
    }
}
