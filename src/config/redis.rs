//! The `redis` section: one server or a cluster's seed list, the key prefix,
//! the pool and its time bounds, stock buckets, and TLS (`rediss://`).

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::check;
use super::TlsFiles;

/// `Debug` is written in `redact.rs`: the passwords in the URLs never show.
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
    /// Most reservations of one bucket decided by one reserve script call
    /// (batch admission, `redis/admission.rs`); 1 = one call per reservation.
    #[serde(default = "default_batch_max")]
    pub batch_max: usize,
    /// Reserve calls of one bucket in flight at once (pipelined).
    #[serde(default = "default_batch_in_flight")]
    pub batch_in_flight: usize,
    /// How long a busy bucket's next call waits for more requests, in µs
    /// (0 = no wait: a batch is whatever queued while the last call ran). A
    /// request for an idle bucket never waits.
    #[serde(default)]
    pub batch_linger_us: u64,
    /// Most requests (by weight: an order counts its lines) queued for one
    /// bucket's calls, beside those in flight; past it a request is refused
    /// at once with 503 instead of queueing without bound.
    #[serde(default = "default_batch_queue_max")]
    pub batch_queue_max: usize,
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

fn default_batch_max() -> usize {
    64
}

fn default_batch_in_flight() -> usize {
    2
}

/// 64 full calls of the default `batch_max`: a few tens of milliseconds of a
/// busy SKU's work, far more than a sale's concurrency per api node needs.
fn default_batch_queue_max() -> usize {
    4096
}

/// Longest `redis.batch_linger_us`: a linger is a latency every batched
/// request may pay.
const BATCH_LINGER_MAX_US: u64 = 1000;

impl RedisSettings {
    /// The nodes to connect to: `urls` in cluster mode (or `url` when it is
    /// empty), `url` alone otherwise.
    pub fn node_urls(&self) -> Vec<String> {
        match self.mode {
            RedisMode::Cluster if !self.urls.is_empty() => self.urls.clone(),
            _ => vec![self.url.clone()],
        }
    }

    /// Bounds, a prefix that cannot break hash tags, URLs the client accepts,
    /// a seed list only in cluster mode, and TLS files only with `rediss://`.
    pub fn validate(&self) -> anyhow::Result<()> {
        check::all(&[
            (self.pool_max >= 1, "redis.pool_max", "must be >= 1"),
            (
                (1..=1024).contains(&self.max_buckets),
                "redis.max_buckets",
                "must be in 1..=1024",
            ),
            (
                self.bucket_lease_max >= 1,
                "redis.bucket_lease_max",
                "must be >= 1",
            ),
            (
                (1..=1024).contains(&self.batch_max),
                "redis.batch_max",
                "must be in 1..=1024",
            ),
            (
                self.batch_queue_max >= self.batch_max,
                "redis.batch_queue_max",
                "must be >= redis.batch_max",
            ),
            (
                (1..=64).contains(&self.batch_in_flight),
                "redis.batch_in_flight",
                "must be in 1..=64",
            ),
            (
                self.batch_linger_us <= BATCH_LINGER_MAX_US,
                "redis.batch_linger_us",
                "must be <= 1000 (µs)",
            ),
            (
                check::valid_prefix(&self.key_prefix),
                "redis.key_prefix",
                "may hold only [A-Za-z0-9_.:-] (no `{`/`}`: they would break hash tags)",
            ),
        ])?;
        self.validate_urls()?;
        self.validate_tls()
    }

    /// The seed list only in cluster mode (whether the client takes each
    /// URL: `config_check.rs`).
    fn validate_urls(&self) -> anyhow::Result<()> {
        if self.mode == RedisMode::Standalone && !self.urls.is_empty() {
            bail!(
                "invalid configuration key `redis.urls`: read only with redis.mode: cluster \
                 (a standalone Redis is redis.url)"
            );
        }
        Ok(())
    }

    /// TLS files apply only where TLS is on: a CA next to a plain URL is a
    /// mistake that would otherwise leave the link unencrypted without a word.
    fn validate_tls(&self) -> anyhow::Result<()> {
        let nodes = self.node_urls();
        let tls = nodes.iter().any(|u| u.starts_with("rediss://"));
        if tls && !nodes.iter().all(|u| u.starts_with("rediss://")) {
            bail!("invalid configuration key `redis.urls`: mixes rediss:// and redis:// nodes");
        }
        self.tls
            .validate("redis", tls, "redis.url is not rediss://")
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{repo_config, RedisMode, Settings};

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
}
