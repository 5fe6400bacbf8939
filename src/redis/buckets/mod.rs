//! Stock buckets: one hot SKU's stock split over N slots (N primaries of a
//! Redis Cluster), with a pool in the SKU's home slot that leases chunks to the
//! buckets on demand. See docs/architecture.md, "Stock buckets".
//!
//! - `route`: which bucket a buyer belongs to;
//! - `layout`, `tags`, `cache`: how many buckets, their hash tags, the cache;
//! - `transfer`: moving units between the pool and a bucket (debit, credit, settle);
//! - `refill`: leasing for a dry bucket, reclaiming from siblings, draining;
//! - `quiet`: the double read that tells a refill the stock is gone everywhere;
//! - `setup`: creating and priming buckets;
//! - `merge`: the reconciler's multi-slot read;
//! - `view`: the per-bucket stock shown by the API.

pub mod cache;
pub mod layout;
pub mod merge;
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
pub use transfer::{Holder, Take, Transferred};
