//! Where the time went, read without the stockd under test: latency
//! percentiles and answer tallies ([`stats`]), CPU per process ([`cpu`]), Redis
//! stalls ([`slowlog`]), a drop's answers by window ([`drop_windows`]). The layer below the driver: nothing here sends a request.

pub mod cpu;
pub mod drop_windows;
pub mod slowlog;
pub mod stats;
pub mod storm_lags;
