//! Stock buckets: one hot SKU's stock split over N slots (N primaries of a
//! Redis Cluster), with a pool in the SKU's home slot that leases chunks to the
//! buckets on demand. See docs/architecture.md, "Stock buckets".

pub mod route;

pub use route::bucket_of;
