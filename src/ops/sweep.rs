//! The closer's backstop pass (SPEC §5): releases `RESERVED` rows past their
//! expiry that the delay queue never delivered, and retries Redis mirrors
//! still pending after a Redis outage.
//!
//! One call is one bounded step, the sweep's counterpart of the consumer's
//! batch: at most [`SKUS_MAX`] SKUs with one batch of rows each (one
//! transaction per SKU, [`super::lifecycle::release_expired`]), then one batch
//! of pending mirrors. Whether to go again at once (a full batch) or after the
//! sweep interval is the closer's loop's call, so a test drives one step.

use crate::clock::unix_ms;
use crate::db::{ledger, settle, Db, DbError};
use crate::domain::SkuId;
use crate::redis::RedisStore;

use super::lifecycle::{mirror, release_expired};

/// SKUs examined per pass: bounds one step's work and the SKU list it reads.
pub const SKUS_MAX: usize = 100;
/// A pending mirror younger than this is still being done by its own request.
const PENDING_MIRROR_AGE_MS: u64 = 2000;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Swept {
    /// Rows released, over every SKU examined.
    pub released: usize,
    /// Pending mirrors retried.
    pub mirrors_retried: usize,
    /// A SKU's batch or the mirror batch was full: more is likely waiting, so
    /// the loop goes again without sleeping.
    pub full: bool,
}

/// One pass: per SKU with `RESERVED` rows expired before `cutoff_ms`, release
/// up to `batch` of them and mirror each to Redis; then retry up to `batch`
/// pending mirrors. A mirror that fails stays pending for the next pass.
pub async fn pass(
    db: &Db,
    redis: &RedisStore,
    cutoff_ms: u64,
    batch: usize,
) -> Result<Swept, DbError> {
    let skus = db
        .bounded(async {
            let mut conn = db.conn().await?;
            settle::skus_with_expired(&mut conn, cutoff_ms, SKUS_MAX).await
        })
        .await?;
    let mut swept = Swept::default();
    for raw in skus {
        let Ok(sku_id) = SkuId::new(raw) else {
            continue;
        };
        let released = db
            .bounded(release_expired(db, sku_id, cutoff_ms, batch))
            .await?;
        swept.released += released.len();
        swept.full |= released.len() >= batch;
        for row in &released {
            mirror(db, redis, row).await;
        }
    }
    let older_than = unix_ms().saturating_sub(PENDING_MIRROR_AGE_MS);
    let pending = db
        .bounded(async {
            let mut conn = db.conn().await?;
            ledger::pending_mirrors(&mut conn, older_than, batch).await
        })
        .await?;
    for row in &pending {
        mirror(db, redis, row).await;
    }
    swept.mirrors_retried = pending.len();
    swept.full |= pending.len() >= batch;
    Ok(swept)
}
