//! The one integration-test binary (one link step for every feature test).
//! Every test runs against the real Redis, RabbitMQ and MariaDB, isolated by its
//! own database, key prefix and queue names (see `helpers`).

// Test code: a panic on a failed unwrap is the failure report (Cargo.toml [lints]).
#![allow(clippy::unwrap_used)]

mod helpers;
#[path = "../support/process.rs"]
mod owned;
// Where a server runs: the chaos suite's network namespaces are dead code
// here, every tests/it server is on loopback.
#[allow(dead_code)]
#[path = "../support/place.rs"]
mod place;
#[path = "../support/ports.rs"]
mod ports;
#[path = "../support/proxy.rs"]
mod proxy;
// The private servers, shared with tests/chaos: tests/it starts the TLS trio
// and the private Redis; the fault half (kill -9, freeze, clusters, replicas)
// is the chaos suite's, dead code here.
#[allow(dead_code)]
#[path = "../support/servers/mod.rs"]
mod servers;

mod adjustments;
mod adjustments_cap;
mod adjustments_once;
mod adjustments_reconciler;
mod audit;
mod auth;
mod auth_owners;
mod auth_spelling;
mod bad_input;
mod batch_admission;
mod bench_layers;
mod buckets;
mod cli;
mod cluster;
mod compare;
mod console;
mod crate_layers;
mod deploy;
mod dlq;
mod docs;
mod driver_fence;
mod events;
mod events_paths;
mod events_race;
mod expire_batch;
mod extend;
mod hold_budget;
mod kubernetes;
mod lapse_limit;
mod lifecycle;
mod listener_tls;
mod lost_writes;
mod mysql_lost;
mod mysql_pool;
mod openapi;
mod orders_admission_batch;
mod orders_api;
mod orders_audit;
mod orders_batches;
mod orders_intents;
mod orders_lifecycle;
mod orders_mysql_lost;
mod orders_script;
mod orders_sweeper_mysql;
mod outage;
mod outage_names;
mod passes;
mod pipeline;
mod readiness;
mod reconcile;
mod redis_links;
mod reserve;
mod rule_homes;
mod sale_schedule;
mod sale_window;
mod scripts;
mod secret_files;
mod security;
mod soldout;
mod startup;
mod stuck;
mod telemetry;
mod tls;
mod tracing;
mod warmup_probe;
