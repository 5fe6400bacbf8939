//! The `amqp` section: the broker (or a cluster's nodes tried in turn), queue
//! names, publishing and retry bounds, the outbox group commit, and TLS (`amqps://`).

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::check;
use super::TlsFiles;

/// `Debug` is written in `redact.rs`: the passwords in the URLs never show.
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

    /// A publisher channel at least, a plain queue prefix, and TLS files only
    /// with `amqps://` (whether the client takes the URLs: `config_check.rs`).
    pub fn validate(&self) -> anyhow::Result<()> {
        check::all(&[
            (
                self.publish_channels >= 1,
                "amqp.publish_channels",
                "must be >= 1",
            ),
            (
                check::valid_prefix(&self.queue_prefix),
                "amqp.queue_prefix",
                "may hold only [A-Za-z0-9_.:-]",
            ),
        ])?;
        self.validate_tls()
    }

    /// As for Redis: TLS files next to a plain URL are refused, not ignored.
    fn validate_tls(&self) -> anyhow::Result<()> {
        let brokers = self.broker_urls();
        let tls = brokers.iter().any(|u| u.starts_with("amqps://"));
        if tls && !brokers.iter().all(|u| u.starts_with("amqps://")) {
            bail!("invalid configuration key `amqp.urls`: mixes amqps:// and amqp:// brokers");
        }
        self.tls.validate("amqp", tls, "amqp.url is not amqps://")
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{repo_config, Settings};

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
}
