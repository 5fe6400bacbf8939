//! The `mysql` section: the ledger database's URL, pool, time bound and TLS.
//!
//! The URL is parsed by the driver, which only `db/` names: `config_check.rs`
//! refuses a URL it would not take, by its key, after this section's checks.

use std::path::PathBuf;

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
    /// Bounds the driver needs, TLS files only with TLS on (the URL:
    /// `config_check.rs`).
    pub fn validate(&self) -> anyhow::Result<()> {
        check::all(&[
            (
                self.query_timeout_ms >= 100,
                "mysql.query_timeout_ms",
                "must be >= 100",
            ),
            (self.pool_max >= 1, "mysql.pool_max", "must be >= 1"),
        ])?;
        self.tls
            .files()
            .validate("mysql", self.tls.require, "mysql.tls.require is false")
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
