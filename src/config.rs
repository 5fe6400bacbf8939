//! Layered configuration: `config/base.yaml` < `config/$STOCKD_ENV.yaml` <
//! `STOCKD__SECTION__KEY` environment variables < CLI flags.
//!
//! The layers are merged as YAML trees first and deserialized once into typed
//! settings with `deny_unknown_fields`, so a typo in any layer is reported by its
//! dotted key name instead of being silently ignored.

mod cidr;
mod production;

pub use cidr::Cidr;

pub use production::{ADMIN_TOKEN_LEN_MIN, EXAMPLE_ADMIN_TOKENS};

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use serde_yaml::{Mapping, Value};

/// Prefix of environment variables that override configuration keys.
const ENV_PREFIX: &str = "STOCKD__";

/// When the client is told "reserved" (SPEC §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// 201 after the broker confirmed the deduction message (202 if the confirm is late).
    Queue,
    /// 201 right after the Lua script; the relay publishes asynchronously.
    Redis,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub http: HttpSettings,
    pub admin: AdminSettings,
    pub mysql: MysqlSettings,
    pub redis: RedisSettings,
    pub amqp: AmqpSettings,
    pub reservation: ReservationSettings,
    pub relay: RelaySettings,
    pub consumer: ConsumerSettings,
    pub closer: CloserSettings,
    pub soldout: SoldOutSettings,
    pub reconcile: ReconcileSettings,
    pub metrics: MetricsSettings,
    pub logging: LoggingSettings,
    pub limits: LimitSettings,
}

/// Rate limits against scalpers and bots (0 = off).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// Reservation attempts one buyer may make per second per SKU (refill rate).
    pub per_user_rps: f64,
    /// Attempts one buyer may make at once (bucket size).
    pub per_user_burst: u32,
    /// Requests one client IP may make per second to the public routes.
    pub per_ip_rps: f64,
    /// Requests one client IP may make at once.
    pub per_ip_burst: u32,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// Listen address of the api role.
    pub bind: String,
    /// Worker threads; 0 means one per core.
    pub workers: usize,
    /// Largest JSON body accepted; larger ones are a 400.
    pub max_body_bytes: usize,
    /// Time in-flight requests get on shutdown.
    pub shutdown_grace_secs: u64,
    /// CIDRs of proxies whose `X-Forwarded-For` is believed (client IP for
    /// the per-IP limit and the audit trail); empty: the peer address counts.
    pub trusted_proxies: Vec<String>,
}

#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AdminSettings {
    /// Bearer token of the admin routes; `None` locks them (401).
    pub token: Option<String>,
    /// Listener of the admin routes (and `/metrics`, `/console`); `None`: they
    /// are served on `http.bind` with everything else.
    pub bind: Option<String>,
}

impl std::fmt::Debug for AdminSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never let a `{:?}` print it.
        let shown = self.token.as_ref().map(|_| "<redacted>");
        f.debug_struct("AdminSettings")
            .field("token", &shown)
            .finish()
    }
}

#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MysqlSettings {
    pub url: String,
    pub pool_min: usize,
    pub pool_max: usize,
    pub connect_timeout_secs: u64,
    /// Longest one MySQL operation (its statements, or one transaction) may
    /// take before it is abandoned as a dependency failure.
    pub query_timeout_ms: u64,
    /// TLS to MySQL (off by default: loopback needs none).
    pub tls: MysqlTls,
}

/// MySQL TLS: the driver has no "TLS if offered" mode, so one switch turns it
/// on for every connection and the files below shape it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MysqlTls {
    /// Connect with TLS only; a server without TLS is an error, never plain text.
    pub require: bool,
    /// PEM CA that signed the server certificate; when set it is the only root
    /// trusted. Null: the built-in public roots (webpki-roots).
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate chain (mutual TLS); needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

impl MysqlTls {
    /// The file part, shaped like the other dependencies' settings.
    pub fn files(&self) -> TlsFiles {
        TlsFiles {
            ca_file: self.ca_file.clone(),
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
        }
    }
}

/// CA and client certificate files of one dependency's TLS, all PEM. Whether
/// TLS is used at all is the URL's scheme (`rediss://`, `amqps://`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// CA that signed the server certificate. Null: the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Client certificate chain (mutual TLS); needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// Private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

impl TlsFiles {
    /// Whether any file is configured.
    pub fn is_set(&self) -> bool {
        self.ca_file.is_some() || self.cert_file.is_some() || self.key_file.is_some()
    }

    /// Checks one section's files: cert and key together, each readable, and
    /// none set while `in_use` is false (`why_unused` says why it is not).
    fn validate(&self, section: &str, in_use: bool, why_unused: &str) -> anyhow::Result<()> {
        let named = [
            ("ca_file", &self.ca_file),
            ("cert_file", &self.cert_file),
            ("key_file", &self.key_file),
        ];
        for (name, path) in named {
            let Some(path) = path else { continue };
            if !in_use {
                bail!("invalid configuration key `{section}.tls.{name}`: set, but {why_unused}");
            }
            std::fs::metadata(path).with_context(|| {
                format!(
                    "invalid configuration key `{section}.tls.{name}`: cannot read {}",
                    path.display()
                )
            })?;
        }
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => bail!(
                "invalid configuration key `{section}.tls.key_file`: required with {section}.tls.cert_file"
            ),
            (None, Some(_)) => bail!(
                "invalid configuration key `{section}.tls.cert_file`: required with {section}.tls.key_file"
            ),
            _ => Ok(()),
        }
    }
}

#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSettings {
    /// `standalone` (one server at `url`) or `cluster` (a Redis Cluster found
    /// through the seed list `urls`).
    #[serde(default)]
    pub mode: RedisMode,
    pub url: String,
    /// Seed nodes of a cluster (`mode: cluster`); empty means `url` alone.
    #[serde(default)]
    pub urls: Vec<String>,
    pub key_prefix: String,
    pub pool_max: usize,
    pub command_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    /// How long a reservation record outlives its expiry, for idempotent replay.
    pub reservation_retention_secs: u64,
    /// Unpublished outbox entries per SKU before reservations are refused with 503.
    pub outbox_max_len: u64,
    /// Cluster client: how often one command is retried after a redirection
    /// it could not follow, TRYAGAIN, CLUSTERDOWN or a dropped node link.
    #[serde(default = "default_cluster_retries")]
    pub cluster_retries: u32,
    /// Cluster client: longest wait before such a retry, in milliseconds.
    #[serde(default = "default_cluster_retry_wait_ms")]
    pub cluster_retry_wait_ms: u64,
    /// Most stock buckets one SKU may be split into (`"buckets"` of the admin API).
    #[serde(default = "default_max_buckets")]
    pub max_buckets: u16,
    /// Most units one lease moves from a split SKU's pool to a bucket.
    #[serde(default = "default_bucket_lease_max")]
    pub bucket_lease_max: u32,
    /// CA and client certificate of a `rediss://` URL.
    pub tls: TlsFiles,
}

/// How stockd reaches Redis.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisMode {
    #[default]
    Standalone,
    Cluster,
}

fn default_cluster_retries() -> u32 {
    3
}

fn default_cluster_retry_wait_ms() -> u64 {
    100
}

fn default_max_buckets() -> u16 {
    16
}

fn default_bucket_lease_max() -> u32 {
    1000
}

impl RedisSettings {
    /// The nodes to connect to: `urls` in cluster mode (or `url` when it is
    /// empty), `url` alone otherwise.
    pub fn node_urls(&self) -> Vec<String> {
        match self.mode {
            RedisMode::Cluster if !self.urls.is_empty() => self.urls.clone(),
            _ => vec![self.url.clone()],
        }
    }
}

#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpSettings {
    pub url: String,
    /// Brokers to try in turn, on connect and on every reconnect (the nodes of
    /// a cluster); empty means `url` alone. See [`AmqpSettings::broker_urls`].
    #[serde(default)]
    pub urls: Vec<String>,
    pub queue_prefix: String,
    pub publish_timeout_ms: u64,
    pub publish_channels: usize,
    pub delivery_limit: u32,
    pub max_retries: u32,
    pub retry_delay_ms: u64,
    /// Most deductions carried by one broker message (outbox group commit).
    pub group_max: usize,
    /// Most group messages awaiting their confirms at once.
    pub group_in_flight: usize,
    /// Milliseconds a batch that is not full waits for more deductions
    /// before it is published (0: it leaves as soon as a slot is free).
    #[serde(default)]
    pub group_linger_ms: u64,
    /// Members of each quorum queue when it is created (0: the broker's choice).
    #[serde(default)]
    pub quorum_initial_group_size: u32,
    /// CA and client certificate of an `amqps://` URL.
    pub tls: TlsFiles,
}

impl AmqpSettings {
    /// The URLs to try, in order: `amqp.urls` when set, else `amqp.url`.
    pub fn broker_urls(&self) -> Vec<String> {
        if self.urls.is_empty() {
            vec![self.url.clone()]
        } else {
            self.urls.clone()
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReservationSettings {
    pub ttl_secs: u64,
    pub durability: Durability,
    pub max_count: u32,
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

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {
    /// Listener for `/metrics` and `/livez` of roles without the HTTP API.
    pub bind: String,
    /// Seconds between refreshes of dependency, queue and stock gauges.
    pub refresh_secs: u64,
    /// SKUs whose available stock is exported with a `sku` label (bounded on
    /// purpose: per-SKU labels for every SKU would explode the series count).
    pub sku_allowlist: Vec<u64>,
}

/// Body format of the alert webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    /// The finding as a JSON object.
    Json,
    /// DingTalk robot text message: `{"msgtype":"text","text":{"content":...}}`.
    Dingtalk,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReconcileSettings {
    /// Time between checks of the reconciler role.
    pub interval_ms: u64,
    /// Repair drift (REDIS_AHEAD at once, REDIS_BEHIND once stable).
    pub repair: bool,
    /// Winning reservations listed per SKU for the exact in-flight count.
    pub max_winners: usize,
    /// Age past which a reservation Redis took and MySQL still lacks counts as
    /// STUCK rather than IN_FLIGHT (SPEC §8).
    pub stuck_after_ms: u64,
    /// Youngest age of a reservation Redis took and MySQL lacks that may be
    /// judged lost by MySQL (MYSQL_BEHIND), with the pipeline drained.
    pub lost_after_ms: u64,
    /// Optional alert webhook (plain `http://`).
    pub webhook_url: Option<String>,
    pub webhook_format: WebhookFormat,
    /// Attempts per alert before it is given up (logged).
    pub webhook_attempts: u32,
    pub webhook_timeout_ms: u64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoggingSettings {
    pub format: LogFormat,
    pub level: String,
}

impl Settings {
    /// Loads the layers from `dir` for environment `env`, applying the process environment.
    pub fn load(dir: &Path, env: &str) -> anyhow::Result<Self> {
        let vars: Vec<(String, String)> = std::env::vars().collect();
        Self::load_with_vars(dir, env, &vars)
    }

    /// Same as [`Settings::load`] with explicit variables (tests pass their own).
    pub fn load_with_vars(
        dir: &Path,
        env: &str,
        vars: &[(String, String)],
    ) -> anyhow::Result<Self> {
        let mut tree = read_yaml(&dir.join("base.yaml"))?;
        let env_file = dir.join(format!("{env}.yaml"));
        if env_file.exists() {
            merge(&mut tree, read_yaml(&env_file)?);
        } else if env != "local" {
            bail!("STOCKD_ENV={env} but {} does not exist", env_file.display());
        }
        for (name, raw) in vars {
            if let Some(path) = name.strip_prefix(ENV_PREFIX) {
                apply_env_override(&mut tree, path, raw)?;
            }
        }
        let settings: Settings = serde_path_to_error::deserialize(tree).map_err(|err| {
            anyhow::anyhow!(
                "invalid configuration key `{}`: {}",
                err.path(),
                err.inner()
            )
        })?;
        settings.validate()?;
        if env == "production" {
            production::check(&settings)?;
        }
        Ok(settings)
    }

    /// Semantic checks serde cannot express; each error names its key.
    pub fn validate(&self) -> anyhow::Result<()> {
        let checks: [(bool, &str, &str); 15] = [
            (
                self.mysql.query_timeout_ms >= 100,
                "mysql.query_timeout_ms",
                "must be >= 100",
            ),
            (
                self.http.max_body_bytes >= 64,
                "http.max_body_bytes",
                "must be >= 64",
            ),
            (self.mysql.pool_max >= 1, "mysql.pool_max", "must be >= 1"),
            (self.redis.pool_max >= 1, "redis.pool_max", "must be >= 1"),
            (
                (1..=1024).contains(&self.redis.max_buckets),
                "redis.max_buckets",
                "must be in 1..=1024",
            ),
            (
                self.redis.bucket_lease_max >= 1,
                "redis.bucket_lease_max",
                "must be >= 1",
            ),
            (
                self.amqp.publish_channels >= 1,
                "amqp.publish_channels",
                "must be >= 1",
            ),
            (
                self.reservation.ttl_secs >= 1,
                "reservation.ttl_secs",
                "must be >= 1",
            ),
            (
                (1..=crate::domain::COUNT_MAX).contains(&self.reservation.max_count),
                "reservation.max_count",
                // A literal because the check table holds &'static str; the
                // assertion below ties it to COUNT_MAX.
                "must be in 1..=1000",
            ),
            (
                self.consumer.batch_max >= 1,
                "consumer.batch_max",
                "must be >= 1",
            ),
            (
                self.consumer.prefetch as usize >= self.consumer.batch_max,
                "consumer.prefetch",
                "must be >= consumer.batch_max",
            ),
            (
                self.reconcile.stuck_after_ms > self.relay.idle_ms,
                "reconcile.stuck_after_ms",
                "must be > relay.idle_ms (the relay's normal retry would look stuck)",
            ),
            (
                self.reconcile.lost_after_ms <= self.reconcile.stuck_after_ms,
                "reconcile.lost_after_ms",
                "must be <= reconcile.stuck_after_ms (lost work is told apart before it could look stuck)",
            ),
            (
                valid_prefix(&self.redis.key_prefix),
                "redis.key_prefix",
                "may hold only [A-Za-z0-9_.:-] (no `{`/`}`: they would break hash tags)",
            ),
            (
                valid_prefix(&self.amqp.queue_prefix),
                "amqp.queue_prefix",
                "may hold only [A-Za-z0-9_.:-]",
            ),
        ];
        for (ok, key, why) in checks {
            if !ok {
                bail!("invalid configuration key `{key}`: {why}");
            }
        }
        production::check_urls(self)?;
        for cidr in &self.http.trusted_proxies {
            if let Err(why) = Cidr::parse(cidr) {
                bail!("invalid configuration key `http.trusted_proxies`: {why}");
            }
        }
        if let Some(bind) = &self.admin.bind {
            bind.parse::<std::net::SocketAddr>()
                .with_context(|| format!("invalid configuration key `admin.bind`: {bind}"))?;
        }
        let limits = &self.limits;
        for (rate, burst, key) in [
            (
                limits.per_user_rps,
                limits.per_user_burst,
                "limits.per_user_burst",
            ),
            (
                limits.per_ip_rps,
                limits.per_ip_burst,
                "limits.per_ip_burst",
            ),
        ] {
            if !(rate >= 0.0 && rate.is_finite()) {
                bail!("invalid configuration key `{key}`: the rate must be a number >= 0");
            }
            if rate > 0.0 && burst < 1 {
                bail!("invalid configuration key `{key}`: must be >= 1 when the rate is on");
            }
        }
        self.http
            .bind
            .parse::<std::net::SocketAddr>()
            .with_context(|| {
                format!("invalid configuration key `http.bind`: {}", self.http.bind)
            })?;
        self.validate_tls()
    }

    /// TLS files apply only where TLS is on: a CA next to a plain URL is a
    /// mistake that would otherwise leave the link unencrypted without a word.
    fn validate_tls(&self) -> anyhow::Result<()> {
        let nodes = self.redis.node_urls();
        let redis_tls = nodes.iter().any(|u| u.starts_with("rediss://"));
        if redis_tls && !nodes.iter().all(|u| u.starts_with("rediss://")) {
            bail!("invalid configuration key `redis.urls`: mixes rediss:// and redis:// nodes");
        }
        self.redis
            .tls
            .validate("redis", redis_tls, "redis.url is not rediss://")?;
        let brokers = self.amqp.broker_urls();
        let amqp_tls = brokers.iter().any(|u| u.starts_with("amqps://"));
        if amqp_tls && !brokers.iter().all(|u| u.starts_with("amqps://")) {
            bail!("invalid configuration key `amqp.urls`: mixes amqps:// and amqp:// brokers");
        }
        self.amqp
            .tls
            .validate("amqp", amqp_tls, "amqp.url is not amqps://")?;
        let mysql = &self.mysql.tls;
        mysql
            .files()
            .validate("mysql", mysql.require, "mysql.tls.require is false")
    }

    /// The settings as YAML with secrets replaced, for `stockd config print`.
    pub fn redacted_yaml(&self) -> anyhow::Result<String> {
        let mut copy = self.clone();
        if copy.admin.token.is_some() {
            copy.admin.token = Some("<redacted>".into());
        }
        copy.mysql.url = redact_url_password(&copy.mysql.url);
        copy.amqp.url = redact_url_password(&copy.amqp.url);
        copy.amqp.urls = copy
            .amqp
            .urls
            .iter()
            .map(|u| redact_url_password(u))
            .collect();
        copy.redis.url = redact_url_password(&copy.redis.url);
        copy.redis.urls = copy
            .redis
            .urls
            .iter()
            .map(|u| redact_url_password(u))
            .collect();
        Ok(serde_yaml::to_string(&copy)?)
    }
}

/// Debug output of the sections with URLs: the password in a URL never shows.
macro_rules! debug_redacting_url {
    ($($name:ident $([$list:ident])?),*) => {$(
        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut shown = self.clone();
                shown.url = redact_url_password(&shown.url);
                $(for url in &mut shown.$list {
                    *url = redact_url_password(url);
                })?
                let yaml = serde_yaml::to_string(&shown).map_err(|_| std::fmt::Error)?;
                write!(f, "{} {{ {} }}", stringify!($name), yaml.trim().replace('\n', ", "))
            }
        }
    )*};
}

debug_redacting_url!(MysqlSettings, RedisSettings[urls], AmqpSettings[urls]);

/// The configuration directory: `STOCKD_CONFIG_DIR` or `./config`.
pub fn config_dir() -> PathBuf {
    std::env::var_os("STOCKD_CONFIG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("config"))
}

/// The environment name: `STOCKD_ENV` or `local`.
pub fn env_name() -> String {
    std::env::var("STOCKD_ENV").unwrap_or_else(|_| "local".into())
}

fn valid_prefix(prefix: &str) -> bool {
    prefix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}

fn read_yaml(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Deep-merges `over` into `base`: mappings merge key by key, anything else replaces.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(base_map), Value::Mapping(over_map)) => {
            for (key, value) in over_map {
                match base_map.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base_map.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// Applies `STOCKD__HTTP__BIND=...` as `http.bind`; the value is parsed as YAML so
/// numbers and booleans keep their types.
fn apply_env_override(tree: &mut Value, path: &str, raw: &str) -> anyhow::Result<()> {
    let keys: Vec<String> = path.split("__").map(|k| k.to_ascii_lowercase()).collect();
    if keys.iter().any(String::is_empty) {
        bail!("invalid environment variable {ENV_PREFIX}{path}: empty key segment");
    }
    // Numbers, booleans and null keep their YAML types; anything else (a prefix
    // like `stockd:` would parse as a YAML map) is taken verbatim as a string.
    let value = match serde_yaml::from_str::<Value>(raw) {
        Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => v,
        _ => Value::String(raw.into()),
    };
    let mut node = tree;
    for key in &keys[..keys.len() - 1] {
        let map = node
            .as_mapping_mut()
            .with_context(|| format!("{ENV_PREFIX}{path}: `{key}` is not a section"))?;
        node = map
            .entry(Value::String(key.clone()))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
    }
    let map = node
        .as_mapping_mut()
        .with_context(|| format!("{ENV_PREFIX}{path}: parent is not a section"))?;
    let key = Value::String(keys[keys.len() - 1].clone());
    // A list-valued key takes a comma-separated string (SPEC §9).
    let value = match map.get(&key) {
        Some(Value::Sequence(_)) => Value::Sequence(
            raw.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| match serde_yaml::from_str::<Value>(item) {
                    Ok(v @ (Value::Number(_) | Value::Bool(_))) => v,
                    _ => Value::String(item.into()),
                })
                .collect(),
        ),
        _ => value,
    };
    map.insert(key, value);
    Ok(())
}

fn redact_url_password(url: &str) -> String {
    // scheme://user:password@host -> scheme://user:<redacted>@host
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:<redacted>@{host}"),
        None => url.to_string(),
    }
}

/// The `reservation.max_count` error names the bound as a literal.
const _: () = assert!(crate::domain::COUNT_MAX == 1000);

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_config() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config")
    }

    #[test]
    fn base_and_local_layers_give_the_spec_defaults() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.http.bind, "127.0.0.1:8080");
        assert_eq!(s.admin.token.as_deref(), Some("dev-admin-token"));
        assert_eq!(s.mysql.url, "mysql://root@127.0.0.1:3306/stockd");
        assert_eq!(s.redis.url, "redis://127.0.0.1:6379");
        assert_eq!(s.redis.key_prefix, "stockd:");
        assert_eq!(s.amqp.url, "amqp://guest:guest@127.0.0.1:5672/%2f");
        assert_eq!(s.amqp.queue_prefix, "stockd.");
        assert_eq!(s.reservation.ttl_secs, 900);
        assert_eq!(s.reservation.durability, Durability::Queue);
    }

    #[test]
    fn production_has_no_admin_token_by_default() {
        let s = Settings::load_with_vars(&repo_config(), "production", &[]).unwrap();
        assert!(s.admin.token.is_none());
    }

    #[test]
    fn env_vars_override_files_with_types_kept() {
        let vars = vec![
            ("STOCKD__RESERVATION__TTL_SECS".to_string(), "3".to_string()),
            (
                "STOCKD__RESERVATION__DURABILITY".to_string(),
                "redis".to_string(),
            ),
            ("STOCKD__ADMIN__TOKEN".to_string(), "s3cret".to_string()),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert_eq!(s.reservation.ttl_secs, 3);
        assert_eq!(s.reservation.durability, Durability::Redis);
        assert_eq!(s.admin.token.as_deref(), Some("s3cret"));
    }

    #[test]
    fn env_strings_that_look_like_yaml_stay_strings() {
        let vars = vec![
            (
                "STOCKD__REDIS__KEY_PREFIX".to_string(),
                "shop1:".to_string(),
            ),
            ("STOCKD__AMQP__QUEUE_PREFIX".to_string(), "- x".to_string()),
        ];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("amqp.queue_prefix"), "{err}");
        let vars = vec![(
            "STOCKD__REDIS__KEY_PREFIX".to_string(),
            "shop1:".to_string(),
        )];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert_eq!(s.redis.key_prefix, "shop1:");
    }

    #[test]
    fn redis_cluster_mode_reads_the_seed_list_and_standalone_refuses_it() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.redis.mode, RedisMode::Standalone);
        assert_eq!(s.redis.node_urls(), std::slice::from_ref(&s.redis.url));
        let seeds = "redis://u:p@127.0.0.1:7001, redis://u:p@127.0.0.1:7002".to_string();
        let vars = vec![
            ("STOCKD__REDIS__MODE".to_string(), "cluster".to_string()),
            ("STOCKD__REDIS__URLS".to_string(), seeds.clone()),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert_eq!(s.redis.mode, RedisMode::Cluster);
        assert_eq!(
            s.redis.node_urls(),
            ["redis://u:p@127.0.0.1:7001", "redis://u:p@127.0.0.1:7002"]
        );
        assert!(
            !format!("{:?}", s.redis).contains(":p@"),
            "passwords redacted"
        );
        assert!(!s.redacted_yaml().unwrap().contains(":p@"));
        // The seed list without cluster mode would be silently ignored: refused.
        let vars = vec![("STOCKD__REDIS__URLS".to_string(), seeds)];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("redis.urls"), "{err}");
        let vars = vec![("STOCKD__REDIS__MODE".to_string(), "sentinel".to_string())];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("redis.mode"), "{err}");
    }

    #[test]
    fn amqp_urls_take_a_comma_separated_list_and_replace_url() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.amqp.broker_urls(), std::slice::from_ref(&s.amqp.url));
        let vars = vec![(
            "STOCKD__AMQP__URLS".to_string(),
            "amqp://a@127.0.0.1:5681/%2f, amqp://a@127.0.0.1:5682/%2f".to_string(),
        )];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert_eq!(
            s.amqp.broker_urls(),
            ["amqp://a@127.0.0.1:5681/%2f", "amqp://a@127.0.0.1:5682/%2f"]
        );
        let vars = vec![(
            "STOCKD__AMQP__URLS".to_string(),
            "amqps://a@h1:5671/%2f,amqp://a@h2:5672/%2f".to_string(),
        )];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("amqp.urls"), "{err}");
    }

    #[test]
    fn an_unknown_key_is_named_in_the_error() {
        let vars = vec![("STOCKD__HTTP__BINDD".to_string(), "x".to_string())];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("bindd"), "{err}");
    }

    #[test]
    fn a_bad_value_is_named_in_the_error() {
        let vars = vec![(
            "STOCKD__RESERVATION__TTL_SECS".to_string(),
            "soon".to_string(),
        )];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("reservation.ttl_secs"), "{err}");
        let vars = vec![("STOCKD__RESERVATION__TTL_SECS".to_string(), "0".to_string())];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("reservation.ttl_secs"), "{err}");
    }

    #[test]
    fn a_lost_bound_above_the_stuck_bound_is_refused() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.reconcile.lost_after_ms, 10_000);
        let vars = vec![(
            "STOCKD__RECONCILE__LOST_AFTER_MS".to_string(),
            "60001".to_string(),
        )];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("reconcile.lost_after_ms"), "{err}");
    }

    #[test]
    fn a_stuck_bound_below_the_relay_retry_age_is_refused() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.reconcile.stuck_after_ms, 60_000);
        let vars = vec![(
            "STOCKD__RECONCILE__STUCK_AFTER_MS".to_string(),
            "100".to_string(),
        )];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(
            err.to_string().contains("reconcile.stuck_after_ms"),
            "{err}"
        );
    }

    #[test]
    fn tls_is_off_by_default() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert!(!s.mysql.tls.require && !s.mysql.tls.files().is_set());
        assert!(!s.redis.tls.is_set() && !s.amqp.tls.is_set());
    }

    #[test]
    fn tls_files_without_tls_are_refused_naming_the_key() {
        let this_file = concat!(env!("CARGO_MANIFEST_DIR"), "/src/config.rs");
        let cases = [
            ("STOCKD__REDIS__TLS__CA_FILE", "redis.tls.ca_file"),
            ("STOCKD__AMQP__TLS__CERT_FILE", "amqp.tls.cert_file"),
            ("STOCKD__MYSQL__TLS__KEY_FILE", "mysql.tls.key_file"),
        ];
        for (var, key) in cases {
            let vars = vec![(var.to_string(), this_file.to_string())];
            let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn a_tls_client_certificate_needs_its_key_and_files_must_exist() {
        let this_file = concat!(env!("CARGO_MANIFEST_DIR"), "/src/config.rs");
        let rediss = (
            "STOCKD__REDIS__URL".to_string(),
            "rediss://h:6380".to_string(),
        );
        let vars = vec![
            rediss.clone(),
            ("STOCKD__REDIS__TLS__CERT_FILE".into(), this_file.into()),
        ];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("redis.tls.key_file"), "{err}");
        let vars = vec![
            ("STOCKD__MYSQL__TLS__REQUIRE".into(), "true".into()),
            (
                "STOCKD__MYSQL__TLS__CA_FILE".into(),
                "/nonexistent.pem".into(),
            ),
        ];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("mysql.tls.ca_file"), "{err}");
        let vars = vec![
            rediss,
            ("STOCKD__REDIS__TLS__CA_FILE".into(), this_file.into()),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert!(s.redis.tls.ca_file.is_some());
    }

    #[test]
    fn secrets_are_never_printed() {
        let vars = vec![
            ("STOCKD__ADMIN__TOKEN".to_string(), "hunter2".to_string()),
            (
                "STOCKD__MYSQL__URL".to_string(),
                "mysql://app:pw123@db:3306/stockd".to_string(),
            ),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        let printed = s.redacted_yaml().unwrap();
        assert!(
            !printed.contains("hunter2") && !printed.contains("pw123"),
            "{printed}"
        );
        let debug = format!("{s:?}");
        assert!(
            !debug.contains("hunter2") && !debug.contains("pw123"),
            "{debug}"
        );
    }
}
