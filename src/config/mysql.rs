//! The `mysql` section: the ledger database's URL, pool, time bound and TLS.
//!
//! The URL is parsed here with the driver's own parser, as the Redis and AMQP
//! URLs are in their sections, so a bad URL is refused at start-up by its key
//! and config needs nothing from `db/`.

use std::path::PathBuf;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::check;
use super::TlsFiles;

/// `Debug` is written in `redact.rs`: the password in `url` never shows.
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

impl MysqlSettings {
    /// Bounds the driver needs, a URL it accepts, TLS files only with TLS on.
    pub fn validate(&self) -> anyhow::Result<()> {
        check::all(&[
            (
                self.query_timeout_ms >= 100,
                "mysql.query_timeout_ms",
                "must be >= 100",
            ),
            (self.pool_max >= 1, "mysql.pool_max", "must be >= 1"),
        ])?;
        if let Err(err) = mysql_async::Opts::from_url(&self.url) {
            bail!("invalid configuration key `mysql.url`: {err}");
        }
        self.tls
            .files()
            .validate("mysql", self.tls.require, "mysql.tls.require is false")
    }

    /// The user `url` names (`None`: none, or a URL the driver refuses,
    /// which [`MysqlSettings::validate`] reports).
    pub fn user(&self) -> Option<String> {
        let opts = mysql_async::Opts::from_url(&self.url).ok()?;
        opts.user().map(str::to_string)
    }
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
