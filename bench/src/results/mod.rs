//! The bench's data types in one place: what a phase measured, the hot-SKU
//! split, the drop's windows, the target rows, the readings from the servers and the whole run.
//! Phases fill them in, the renderers of [`crate::report`] read them;
//! this module imports neither, so neither side can import the other through it.

mod bucket_split;
mod drop_sale;
mod phase_result;
mod ratio;
mod readings;
mod run_report;
mod storm_release;

pub use bucket_split::HotSku;
pub use drop_sale::{DropSale, RedisWindow};
pub use phase_result::{key, LatencyMs, PhaseResult};
pub use ratio::{row, Goal, Ratio};
pub use readings::{BatchSizes, Stall};
pub use run_report::{Machine, Memory, Report};
pub use storm_release::{Burst, ExpiryStorm, ReleasePaths, Released};
