//! The per-process cache of bucket layouts.
//!
//! Every reservation needs its SKU's layout before it can pick a bucket, so
//! the layout is read once per SKU and process (one `HMGET` of the home hash)
//! and kept. It cannot go stale silently: each bucket script compares the
//! bucket count it was routed with to its own and answers `LAYOUT` on a
//! mismatch, and the caller then forgets the entry and reads it again.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use deadpool_redis::redis;

use super::Buckets;
use super::Layout;
use crate::domain::{SkuId, UserId};
use crate::redis::RedisError;

#[derive(Default)]
pub struct LayoutCache {
    layouts: RwLock<HashMap<SkuId, Arc<Layout>>>,
}

impl LayoutCache {
    pub fn get(&self, sku: SkuId) -> Option<Arc<Layout>> {
        self.layouts
            .read()
            .expect("lock poisoned")
            .get(&sku)
            .cloned()
    }

    fn put(&self, layout: Arc<Layout>) {
        self.layouts
            .write()
            .expect("lock poisoned")
            .insert(layout.sku(), layout);
    }

    pub fn forget(&self, sku: SkuId) {
        self.layouts.write().expect("lock poisoned").remove(&sku);
    }
}

impl Buckets {
    /// The SKU's layout, from the cache or read from its home hash. A SKU
    /// that is not loaded reads as one bucket (and is not cached).
    pub async fn layout(&self, sku: SkuId) -> Result<Arc<Layout>, RedisError> {
        if let Some(layout) = self.layouts.get(sku) {
            return Ok(layout);
        }
        self.read_layout(sku).await
    }

    /// Whether the SKU is loaded into Redis: yes when its layout is cached
    /// (a SKU unloaded since is refused by the script that follows), else
    /// one `HMGET` of its home hash, which caches a loaded SKU's layout for
    /// that script's routing.
    pub async fn loaded(&self, sku: SkuId) -> Result<bool, RedisError> {
        if self.layouts.get(sku).is_some() {
            return Ok(true);
        }
        Ok(self.read(sku).await?.1)
    }

    /// Forgets the cached layout and reads it again (after a `LAYOUT` answer).
    pub async fn read_layout(&self, sku: SkuId) -> Result<Arc<Layout>, RedisError> {
        Ok(self.read(sku).await?.0)
    }

    /// The layout as read, and whether the SKU is loaded (cached if so).
    async fn read(&self, sku: SkuId) -> Result<(Arc<Layout>, bool), RedisError> {
        self.layouts.forget(sku);
        let key = self.core.keys.sku(sku);
        let (available, buckets, tags): (Option<String>, Option<String>, Option<String>) = self
            .core
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("available")
                    .arg("buckets")
                    .arg("tags")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let layout = Arc::new(
            Layout::from_fields(sku, buckets.as_deref(), tags.as_deref())
                .map_err(RedisError::BadReply)?,
        );
        let loaded = available.is_some();
        if loaded {
            self.layouts.put(layout.clone());
        }
        Ok((layout, loaded))
    }

    /// The SKU's layout if cached (never waits for Redis).
    pub fn cached_layout(&self, sku: SkuId) -> Option<Arc<Layout>> {
        self.layouts.get(sku)
    }

    /// The buyer's bucket if the SKU's layout is cached (the sold-out board's
    /// check never waits for Redis).
    pub fn cached_bucket_of(&self, sku: SkuId, user: UserId) -> Option<u16> {
        self.layouts.get(sku).map(|l| l.bucket_of(user))
    }
}
