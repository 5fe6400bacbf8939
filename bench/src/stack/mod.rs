//! The stack under test: the stockd child processes ([`child`]), the isolated
//! database, key prefix and queues of a run ([`namespace`]), the machine and
//! server versions ([`machine`]), what the stockd reports on its `/metrics`
//! ([`batches`], [`round_trips`], [`releases`]) and the invariants checked after every phase
//! ([`check`]; an order's rows: [`order_rows`]), the TLS + client token of the
//! secured child ([`secured`]), the collector stand-in of the traced
//! children ([`otlp_sink`]) and a redis-server of the bench's own whose calls
//! can be counted ([`private_redis`]).

pub mod batches;
pub mod check;
pub mod child;
pub mod machine;
pub mod namespace;
pub mod order_rows;
pub mod otlp_sink;
pub mod private_redis;
pub mod releases;
pub mod round_trips;
pub mod scrape;
pub mod secured;
