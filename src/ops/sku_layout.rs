//! The bucket layout a SKU is to have before its stock moves in Redis:
//! asked by a `PUT` (`sku_admin.rs`), an adjustment and a restock's Redis
//! step (`stock_step.rs`) alike.

use crate::domain::SkuId;
use crate::ops::sku_admin_error::SkuAdminError;
use crate::redis::buckets::Layout;
use crate::redis::RedisStore;

/// The layout the SKU is to have: its current one when the count stays, a
/// fresh one for a SKU not loaded yet, or a re-split when nothing of its
/// buyers lives in Redis.
pub(crate) async fn layout_for(
    redis: &RedisStore,
    sku_id: SkuId,
    wanted: u16,
    limit_per_user: u64,
) -> Result<Layout, SkuAdminError> {
    let current = redis.buckets().read_layout(sku_id).await?;
    if current.n() == wanted {
        return Ok((*current).clone());
    }
    let fresh = redis.buckets().choose_layout(sku_id, wanted).await?;
    if redis.skus().sku(sku_id).await?.is_none() {
        return Ok(fresh);
    }
    if let Some(reason) = redis.buckets().buyer_state(&current).await? {
        return Err(SkuAdminError::BucketsLocked(reason));
    }
    redis
        .buckets()
        .resplit(&current, &fresh, limit_per_user)
        .await?;
    Ok(fresh)
}
