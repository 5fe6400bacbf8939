//! The fault suite, `make chaos`: every scenario starts its own redis-server,
//! mariadbd and RabbitMQ node on free loopback ports (data in a temp dir),
//! runs the real `stockd` binary as role processes against them, drives a
//! bounded, seeded load, injects one kind of fault (kill -9, restart empty,
//! snapshot rollback, outage, freeze, memory alarm, maxmemory, and real
//! network partitions between private network namespaces), then waits for
//! the pipeline to drain and audits contract §10 invariants.
//!
//! Every scenario is `#[ignore]`: `cargo test --all-targets` only builds them.
//! Run: `make chaos` (or `cargo test --test chaos -- --ignored --test-threads=1
//! --nocapture [name]`); replay with `CHAOS_SEED=<n>`. See docs/chaos.md.
//!
//! The shared services on 6379/3306/5672 are never touched; every process the
//! suite starts is stopped by pid when its scenario ends, also on a panic.

// Test code: a panic on a failed unwrap is the failure report (Cargo.toml [lints]).
#![allow(clippy::unwrap_used)]

mod audit;
mod drain;
mod events_model;
mod history;
mod load;
mod net;
#[path = "../support/process.rs"]
mod owned;
#[path = "../support/place.rs"]
mod place;
#[path = "../support/ports.rs"]
mod ports;
mod previous_release;
#[path = "../support/proxy.rs"]
mod proxy;
mod scenarios;
mod seed;
// The private servers, shared with tests/it: their TLS-only starters are
// that binary's (the TLS test), dead code here.
#[allow(dead_code)]
#[path = "../support/servers/mod.rs"]
mod servers;
mod stack;
mod stockd;
mod stores;
