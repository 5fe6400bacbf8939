//! Layered configuration: `config/base.yaml` < `config/$STOCKD_ENV.yaml` <
//! `STOCKD__SECTION__KEY` environment variables < CLI flags.
//!
//! One concern per file, so a key's type, default and rule sit together:
//! - `load.rs`: the layers, environment overrides, deserializing once with
//!   `deny_unknown_fields` (a typo in any layer is named by its dotted key);
//! - one file per section or group of sections, each with the `validate` of
//!   its own keys: `http.rs` (http, admin, limits), `auth.rs` (clients and
//!   their scopes), `mysql.rs`, `redis.rs`, `amqp.rs`, `pipeline.rs`
//!   (reservation, relay, consumer, closer, soldout),
//!   `reconcile.rs`, `sale.rs` (the sale window's clock), `telemetry.rs`
//!   (metrics, logging, telemetry), `passes.rs` (the keys of admission
//!   passes, read from their files); `tls_files.rs` is the
//!   `tls` subsection they share; `listener_tls.rs` is `http.tls`, TLS on
//!   stockd's own listeners;
//! - `secret_files.rs`: `…_file` variants of the secrets (`admin.token_file`,
//!   `mysql.url_file`, …), resolved while the layers merge;
//! - `driver_urls.rs`: the dependency URLs, judged by their drivers' parsers;
//! - `production.rs`: what every `STOCKD_ENV` but `local` and `test` refuses;
//! - `redact.rs`: secrets replaced in `config print` and in `{:?}`;
//! - `check.rs` (how a refusal is worded), `cidr.rs` (`http.trusted_proxies`).
//!
//! Config imports no adapter of this crate, so `db`, `redis` and `mq` depend
//! on config, never the reverse: the dependency URLs, which only their
//! drivers can parse, are checked through `driver_urls.rs` (why there:
//! its module doc).

mod amqp;
mod auth;
mod check;
mod cidr;
mod driver_urls;
mod http;
mod listener_tls;
mod load;
mod mysql;
mod passes;
mod pipeline;
mod production;
/// A passing production deployment's environment, for tests beyond this module.
#[cfg(test)]
pub(crate) use production::deployed as deployed_for_tests;
mod reconcile;
mod redact;
mod redis;
mod sale;
mod secret_files;
mod telemetry;
mod tls_files;

pub use self::amqp::AmqpSettings;
pub use self::auth::{AuthSettings, ClientSettings, Scope, TOKEN_SHA256_HEX_LEN};
pub use self::cidr::Cidr;
pub use self::driver_urls::DriverUrls;
pub use self::http::{AdminSettings, HttpSettings, LimitSettings};
pub use self::listener_tls::{read_certificates, read_private_key, ListenerTls};
pub use self::load::{config_dir, env_name};
pub use self::mysql::{MysqlSettings, MysqlTls};
pub use self::passes::{
    KeyMaterial, PassKeyMaterial, PassKeySettings, PassSettings, ED25519_PUBLIC_KEY_BYTES,
    HS256_SECRET_MIN_BYTES,
};
pub use self::pipeline::{
    CloserSettings, ConsumerSettings, Durability, EventSettings, OrderSettings, RelaySettings,
    ReservationSettings, SoldOutSettings,
};
pub use self::production::{
    applies_to as production_applies_to, check as production_check, ADMIN_TOKEN_LEN_MIN,
    EXAMPLE_ADMIN_TOKENS,
};
pub use self::reconcile::{ReconcileSettings, WebhookFormat};
pub use self::redis::{RedisMode, RedisSettings};
pub use self::sale::SaleSettings;
pub use self::telemetry::{
    LogFormat, LoggingSettings, MetricsSettings, OtlpSettings, TelemetrySettings,
};
pub use self::tls_files::TlsFiles;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub http: HttpSettings,
    pub admin: AdminSettings,
    pub auth: AuthSettings,
    pub mysql: MysqlSettings,
    pub redis: RedisSettings,
    pub amqp: AmqpSettings,
    pub reservation: ReservationSettings,
    pub orders: OrderSettings,
    pub relay: RelaySettings,
    pub consumer: ConsumerSettings,
    pub closer: CloserSettings,
    pub soldout: SoldOutSettings,
    pub events: EventSettings,
    pub reconcile: ReconcileSettings,
    pub metrics: MetricsSettings,
    pub logging: LoggingSettings,
    pub telemetry: TelemetrySettings,
    pub limits: LimitSettings,
    /// The sale window's clock on the api nodes.
    #[serde(default)]
    pub sale: SaleSettings,
    pub passes: PassSettings,
}

impl Settings {
    /// Semantic checks serde cannot express, each section its own; each error
    /// names its key. The first refusal is reported.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.mysql.validate()?;
        self.http.validate()?;
        self.admin.validate()?;
        self.auth.validate()?;
        self.limits.validate()?;
        self.redis.validate()?;
        self.amqp.validate()?;
        self.reservation.validate()?;
        self.orders.validate()?;
        self.consumer.validate()?;
        self.events.validate()?;
        self.telemetry.otlp.validate()?;
        self.sale.validate()?;
        self.passes.validate()?;
        (self.reconcile).validate(
            self.relay.idle_ms,
            self.orders.hold_timeout_ms + self.orders.sweep_interval_ms,
        )
    }
}

/// The repository's `config/` directory, which the unit tests load.
#[cfg(test)]
fn repo_config() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config")
}
