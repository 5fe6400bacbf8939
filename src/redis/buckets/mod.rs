//! Stock buckets: one hot SKU's stock split over N slots (N primaries of a
//! Redis Cluster), with a pool in the SKU's home slot that leases chunks to the
//! buckets on demand. See docs/architecture.md, "Stock buckets".
//!
//! [`Buckets`] is the aggregate: every command on a SKU's layout, its bucket
//! hashes and the transfers between them. Every other aggregate that routes by
//! bucket (reservations, SKUs, outbox, drift) holds a clone of it, so they all
//! read one layout cache.
//!
//! - `route`: which bucket a buyer belongs to;
//! - `layout`, `tags`, `cache`: how many buckets, their hash tags, the cache;
//! - `transfer`: moving units between the pool and a bucket (debit, credit, settle);
//! - `refill`: leasing for a dry bucket, reclaiming from siblings, draining;
//! - `quiet`: the double read that tells a refill the stock is gone everywhere;
//! - `setup`: creating and priming buckets;
//! - `resplit`: changing a loaded SKU's bucket count;
//! - `view`: the per-bucket stock shown by the API.

use std::sync::Arc;

use super::core::Core;

pub mod cache;
pub mod layout;
mod quiet;
pub mod refill;
pub mod resplit;
pub mod route;
pub mod setup;
pub mod tags;
pub mod transfer;
pub mod view;

pub use cache::LayoutCache;
pub use layout::Layout;
pub use refill::{Refill, RefillEnd, RefillGates};
pub use route::bucket_of;
pub use transfer::{Holder, PendingTransfer, Take, Transferred};
pub use view::BucketStock;

/// Layouts, bucket hashes, transfers and refills. Cheap to clone: every
/// field is shared, so each clone sees one cache and one set of refill gates.
#[derive(Clone)]
pub struct Buckets {
    pub(super) core: Arc<Core>,
    /// Bucket layouts of split SKUs, per process.
    layouts: Arc<LayoutCache>,
    /// Single-flight refills of dry buckets.
    refills: Arc<RefillGates>,
    /// `redis.bucket_lease_max`.
    lease_max: i64,
}

impl Buckets {
    pub(super) fn new(core: Arc<Core>, lease_max: i64) -> Self {
        Self {
            core,
            layouts: Default::default(),
            refills: Default::default(),
            lease_max,
        }
    }

    /// Forgets the cached layout of `sku` (its home hash was just rewritten).
    pub(super) fn forget_layout(&self, sku: crate::domain::SkuId) {
        self.layouts.forget(sku);
    }

    /// Which refill generation a reservation attempt starts from (pass it to
    /// [`Self::refill`]).
    pub(super) fn refill_generation(&self, sku: crate::domain::SkuId, bucket: u16) -> u64 {
        self.refills.generation(sku, bucket)
    }
}
