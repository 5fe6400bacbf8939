//! The sections that shape a reservation's way through the pipeline: how long
//! it lives and when the client hears "reserved" (`reservation`), the outbox
//! relay (`relay`), the MySQL consumer (`consumer`), the expiry closer
//! (`closer`) and the sold-out short-circuit (`soldout`).

use serde::{Deserialize, Serialize};

use super::check;

/// When the client is told "reserved" (contract §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// 201 after the broker confirmed the deduction message (202 if the confirm is late).
    Queue,
    /// 201 right after the Lua script; the relay publishes asynchronously.
    Redis,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationSettings {
    pub ttl_secs: u64,
    pub durability: Durability,
    pub max_count: u32,
    /// Seconds one extension adds to a reservation's `expires_at` (the hold
    /// while the buyer pays: `POST .../extend`).
    pub extend_secs: u64,
    /// Extensions one reservation may have; 0 turns extending off (409
    /// `EXTENSION_LIMIT` at once).
    pub max_extensions: u32,
}

/// Most extensions one reservation may be given: a bound on how long one
/// buyer can keep a unit off sale (`MAX_EXTENSIONS` × `extend_secs`).
pub const MAX_EXTENSIONS: u32 = 10;

/// The `reservation.max_extensions` error names the bound as a literal.
const _: () = assert!(MAX_EXTENSIONS == 10);

/// The `reservation.max_count` error names the bound as a literal.
const _: () = assert!(crate::domain::COUNT_MAX == 1000);

impl ReservationSettings {
    /// A reservation lives at least a second and asks for 1..=COUNT_MAX units.
    pub fn validate(&self) -> anyhow::Result<()> {
        check::all(&[
            (self.ttl_secs >= 1, "reservation.ttl_secs", "must be >= 1"),
            (
                (1..=crate::domain::COUNT_MAX).contains(&self.max_count),
                "reservation.max_count",
                // A literal because the check table holds &str; the assertion
                // above ties it to COUNT_MAX.
                "must be in 1..=1000",
            ),
            (
                self.extend_secs >= 1,
                "reservation.extend_secs",
                "must be >= 1",
            ),
            (
                self.max_extensions <= MAX_EXTENSIONS,
                "reservation.max_extensions",
                // A literal like max_count's; the assertion below ties it to the constant.
                "must be in 0..=10",
            ),
        ])
    }
}

/// Orders of several SKUs (`POST /v1/orders`, docs/architecture.md "Orders").
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OrderSettings {
    /// Most lines one order may have.
    pub max_lines: usize,
    /// How long an order held line by line (a Redis Cluster, a split SKU)
    /// may take from its intent to its commit; past it the sweeper undoes it.
    pub hold_timeout_ms: u64,
    /// How often each api node's sweeper looks for such intents past it.
    pub sweep_interval_ms: u64,
}

/// The `orders.max_lines` error names the bound as a literal.
const _: () = assert!(crate::domain::LINES_MAX == 100);

impl OrderSettings {
    pub fn validate(&self) -> anyhow::Result<()> {
        check::all(&[
            (
                (1..=crate::domain::LINES_MAX).contains(&self.max_lines),
                "orders.max_lines",
                "must be in 1..=100",
            ),
            (
                (100..=60_000).contains(&self.hold_timeout_ms),
                "orders.hold_timeout_ms",
                "must be in 100..=60000",
            ),
            (
                (100..=3_600_000).contains(&self.sweep_interval_ms),
                "orders.sweep_interval_ms",
                "must be in 100..=3600000",
            ),
        ])
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RelaySettings {
    pub idle_ms: u64,
    pub interval_ms: u64,
    pub batch_size: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConsumerSettings {
    pub batch_max: usize,
    pub batch_wait_ms: u64,
    pub prefetch: u16,
    pub deadlock_retries: u32,
}

impl ConsumerSettings {
    /// A batch holds one delivery at least, and the broker hands over enough
    /// deliveries to fill one.
    pub fn validate(&self) -> anyhow::Result<()> {
        check::all(&[
            (self.batch_max >= 1, "consumer.batch_max", "must be >= 1"),
            (
                self.prefetch as usize >= self.batch_max,
                "consumer.prefetch",
                "must be >= consumer.batch_max",
            ),
        ])
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CloserSettings {
    /// Time between sweep passes that found less than a full batch.
    pub sweep_interval_ms: u64,
    /// Extra time past expiry before the sweep releases a row (lets the delay
    /// queue, the primary path, act first; covers clock skew between hosts).
    pub grace_ms: u64,
    /// Rows released per SKU per sweep transaction.
    pub sweep_batch: usize,
    /// Expiry deliveries taken per batch.
    pub expiry_batch: usize,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SoldOutSettings {
    /// Whether api nodes answer SOLD_OUT from local memory.
    pub enabled: bool,
    /// Longest a local flag is trusted without re-validation against Redis.
    pub flag_ttl_ms: u64,
    /// Largest number of winning request ids held per sold-out SKU; above it
    /// the SKU is not short-circuited (replays could not be told apart).
    pub max_tracked_winners: usize,
}

/// Events out (`events`; docs/operations.md, "Events").
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventSettings {
    /// Whether any event is published.
    pub enabled: bool,
    /// Types published, as AMQP topic patterns (`stockd.#`: all).
    pub types: Vec<String>,
    /// The CloudEvents `source` attribute.
    pub source: String,
    /// Time between event-relay passes that found less than a full batch.
    pub relay_interval_ms: u64,
    /// Events one relay pass takes from the outbox table.
    pub relay_batch: usize,
}

impl EventSettings {
    pub fn validate(&self) -> anyhow::Result<()> {
        let patterns_ok = self.types.iter().all(|p| is_topic_pattern(p));
        check::all(&[
            (
                patterns_ok,
                "events.types",
                "each pattern is dot-separated non-empty words (`*` one word, `#` any)",
            ),
            (
                !self.source.trim().is_empty(),
                "events.source",
                "must not be empty",
            ),
            (
                self.relay_interval_ms >= 1,
                "events.relay_interval_ms",
                "must be >= 1",
            ),
            (
                (1..=5000).contains(&self.relay_batch),
                "events.relay_batch",
                "must be in 1..=5000",
            ),
        ])
    }
}

/// Whether `pattern` is a well-formed AMQP topic pattern: dot-separated
/// non-empty words (`*` and `#` are words too).
fn is_topic_pattern(pattern: &str) -> bool {
    !pattern.is_empty() && pattern.split('.').all(|w| !w.is_empty())
}

#[cfg(test)]
mod event_tests {
    use super::is_topic_pattern;

    #[test]
    fn event_type_patterns_are_dot_separated_words() {
        assert!(is_topic_pattern("stockd.#"));
        assert!(is_topic_pattern("stockd.reservation.*"));
        assert!(!is_topic_pattern("stockd..x"));
        assert!(!is_topic_pattern(""));
        assert!(!is_topic_pattern("stockd."));
    }
}
