//! stockd — flash-sale inventory deduction.
//!
//! ```text
//! client ─HTTP─► roles::api ─EVALSHA─► redis (stage 1: atomic pre-deduct + outbox entry)
//!                    └─publish+confirm─► mq (stage 2: durable hand-off; outbox relay)
//!                                          └─► roles::consumer ─► db (stage 3: batched ledger)
//! ```
//!
//! Crate map (the product contract: docs/contract.md; the layers and why:
//! docs/architecture.md, "Modules and the direction of dependencies"):
//! - [`domain`]: ids, counts, reservation states and transitions, the deduction,
//!   admission outcomes and MySQL's admission rule (pure, no I/O).
//! - [`redis`]: key builder, Lua scripts, the hot-path connection, stock buckets.
//! - [`mq`]: RabbitMQ topology, deduction message, confirming publisher, batching.
//! - [`outbox`]: publish-and-remove of outbox entries (group commit, acker), the relay.
//! - [`db`]: MySQL pool, migrations, `sku_stock`, the ledger by concern.
//! - [`health`]: circuit breaker and outage log (dependency failures).
//! - [`soldout`]: local sold-out flags kept in step through Redis Pub/Sub.
//! - [`alert`]: the reconciler's webhook alerts.
//! - [`otel`]: distributed traces (OpenTelemetry, OTLP export, W3C context).
//! - [`ops`]: operations spanning stores: SKU create/restock, the lifecycle,
//!   the closer's sweep, reconcile (`MYSQL_BEHIND`, `STUCK`, drift), the
//!   invariant check behind `stockd audit` (`invariants`), warm-up, dead-letter
//!   list/replay, the console's overview.
//! - [`roles`]: what `--role` runs: api, consumer, closer, reconciler, all; and
//!   the polled gauges every role runs (`roles::gauges`).
//! - [`clock`]: epoch milliseconds and their RFC 3339 form.
//! - [`tls`]: what the drivers' TLS shares: the crypto provider, the `*.tls` files.
//! - [`config_check`]: the configuration's URLs judged by the drivers' parsers.
//! - [`config`], [`cli`] (+ [`cli_jobs`], [`cli_dlq`]: the one-shot subcommands),
//!   [`telemetry`], [`shutdown`], [`sdnotify`], [`resources`]: process plumbing.

pub mod alert;
pub mod cli;
pub mod cli_dlq;
pub mod cli_jobs;
pub mod clock;
pub mod config;
pub mod config_check;
pub mod db;
pub mod domain;
pub mod events;
pub mod health;
pub mod mq;
pub mod ops;
pub mod otel;
pub mod outbox;
pub mod redis;
pub mod resources;
pub mod roles;
pub mod sdnotify;
pub mod shutdown;
pub mod soldout;
pub mod telemetry;
pub mod tls;
