//! Operations that span stores (MySQL decides, Redis mirrors). Each is callable
//! from an HTTP handler, a CLI subcommand or a background role alike.

pub mod adjustment;
pub mod compare;
pub mod correction;
pub mod dlq;
pub mod invariants;
pub mod lifecycle;
pub mod order_recommit;
pub mod order_saga;
pub mod order_sweep_error;
pub mod order_sweeper;
pub mod overview;
pub mod rebalance;
pub mod rebuild;
pub mod reconcile;
pub mod sale_schedule;
pub mod sku_admin;
pub mod sku_admin_error;
pub mod sku_layout;
pub mod stock_step;
pub mod stuck;
pub mod sweep;
pub mod warmup;
