//! stockd — flash-sale inventory deduction.
//!
//! ```text
//! client ─HTTP─► roles::api ─EVALSHA─► redis (stage 1: atomic pre-deduct + outbox entry)
//!                    └─publish+confirm─► mq (stage 2: durable hand-off; outbox relay)
//!                                          └─► roles::consumer ─► db (stage 3: batched ledger)
//! ```
//!
//! The module map: every top-level module once, with its floor. This list
//! is the one home of both (docs/architecture.md keeps the drawing and the
//! reasons, "Modules and the direction of dependencies"); `tests/it/crate_layers.rs`
//! reads it and fails when a module is missing here, when one is listed that
//! `lib.rs` does not declare, or when a file names through `crate::` a module
//! that is not on a lower floor. The product contract is docs/contract.md.
//!
//! - [`domain`] (floor 0): ids, counts, a hold's states and when it is due,
//!   the deduction, admission outcomes and MySQL's admission rule (pure, no I/O).
//! - [`clock`] (floor 0): epoch milliseconds and their RFC 3339 form.
//! - [`shutdown`] (floor 0): the one shutdown signal and `sleep_or_cancel`.
//! - [`config`] (floor 1): the layered settings, one file per section with its
//!   validation; the production checks; secrets never printed.
//! - [`health`] (floor 1): circuit breaker and outage log (dependency failures).
//! - [`sdnotify`] (floor 1): systemd's readiness and watchdog notifications.
//! - [`tls`] (floor 2): what the drivers' TLS shares: the crypto provider, the
//!   `*.tls` files.
//! - [`passes`] (floor 2): admission passes, JWTs a waiting room signs: the
//!   key ring, verification in memory, issuing (no I/O).
//! - [`events`] (floor 2): the events stockd publishes (types, CloudEvents
//!   envelope, the per-transaction collector, the type filter; no I/O).
//! - [`redis`] (floor 3): key builder, Lua scripts and their shared helpers,
//!   the hot-path connection, one type per aggregate, stock buckets.
//! - [`mq`] (floor 3): RabbitMQ topology, the deduction message's wire format,
//!   confirming publisher, deliveries and their settling, trace context.
//! - [`db`] (floor 3): all SQL: MySQL pool, migrations, `sku_stock`, the ledger
//!   by concern, orders, a hold's statements for both (`holds`), movements,
//!   the event outbox, audit and console reads.
//! - [`alert`] (floor 3): the reconciler's webhook alerts.
//! - [`otel`] (floor 3): distributed traces (OpenTelemetry, OTLP export, W3C
//!   context).
//! - [`resources`] (floor 4): the shared pools, Redis store, publisher and
//!   MySQL breaker every role is built from.
//! - [`config_check`] (floor 4): the configuration's URLs judged by the
//!   drivers' parsers.
//! - [`outbox`] (floor 4): publish-and-remove of outbox entries (group commit,
//!   acker), the relay, the event relay.
//! - [`soldout`] (floor 4): local sold-out flags kept in step through Redis
//!   Pub/Sub.
//! - [`sale`] (floor 4): the board of every SKU's sale terms (window, pass
//!   required) in memory, kept in step through Redis Pub/Sub and MySQL.
//! - [`telemetry`] (floor 4): logs, the metrics recorder, the metrics listener
//!   of the non-api roles.
//! - [`ops`] (floor 5): operations spanning stores: SKU create/restock and
//!   adjustments, the hold lifecycle, the closer's sweep, reconcile
//!   (`MYSQL_BEHIND`, `STUCK`, drift), the invariant check behind `stockd
//!   audit`, warm-up, dead letters, the console's overview.
//! - [`roles`] (floor 6): what `--role` runs: api, consumer, closer,
//!   reconciler, all; and the polled gauges every role runs.
//! - [`cli_jobs`] (floor 6): the one-shot subcommands (warm-up, reconcile,
//!   audit).
//! - [`cli`] (floor 8): the command line's arguments.
//! - [`cli_dlq`] (floor 9): the dead-letter subcommand.
//!
//! The load generator is a crate of its own (`bench/`, binary `stockd-bench`).

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
pub mod passes;
pub mod redis;
pub mod resources;
pub mod roles;
pub mod sale;
pub mod sdnotify;
pub mod shutdown;
pub mod soldout;
pub mod telemetry;
pub mod tls;
