//! stockd — flash-sale inventory deduction.
//!
//! ```text
//! client ─HTTP─► roles::api ─EVALSHA─► redis (stage 1: atomic pre-deduct + outbox entry)
//!                    └─publish+confirm─► mq (stage 2: durable hand-off; outbox relay)
//!                                          └─► roles::consumer ─► db (stage 3: batched ledger)
//! ```
//!
//! Crate map:
//! - [`domain`]: ids, counts, reservation states, admission outcomes (pure).
//! - [`redis`]: key builder, Lua scripts, the hot-path connection.
//! - [`mq`]: RabbitMQ topology, deduction message, confirming publisher.
//! - [`outbox`]: publish-and-remove of outbox entries, the relay (check-back).
//! - [`db`]: MySQL pool, migrations, `sku_stock`, the ledger.
//! - [`health`]: circuit breaker and outage log (dependency failures).
//! - [`soldout`]: local sold-out flags kept in step through Redis Pub/Sub.
//! - [`ops`]: operations spanning stores (create/restock SKU, reconcile, audit,
//!   dead-letter replay, ...).
//! - [`roles`]: what `--role` runs: api, consumer, all.
//! - `bench` (cargo feature `bench`, on by default, off in production builds):
//!   the load generator behind `stockd bench`.
//! - [`clock`]: epoch milliseconds and their RFC 3339 form.
//! - [`tls`]: the `*.tls` settings turned into each driver's rustls options.
//! - [`config`], [`cli`], [`telemetry`], [`shutdown`], [`resources`]: process plumbing.

pub mod alert;
#[cfg(feature = "bench")]
pub mod bench;
pub mod cli;
pub mod cli_dlq;
pub mod cli_jobs;
pub mod clock;
pub mod config;
pub mod db;
pub mod domain;
pub mod health;
pub mod mq;
pub mod ops;
pub mod outbox;
pub mod redis;
pub mod resources;
pub mod roles;
pub mod sdnotify;
pub mod shutdown;
pub mod soldout;
pub mod telemetry;
pub mod tls;
