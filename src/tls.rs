//! TLS to the dependencies (config `mysql.tls`, `redis.tls`, `amqp.tls`): what
//! the three drivers share — the one crypto provider and the reading of the
//! configured CA and client certificate files, each error naming its key.
//! Each driver's own TLS options are built in its adapter, so the driver
//! stays behind it: `db/pool.rs` (MySQL), `redis/tls.rs`, `mq/tls.rs`. All
//! three drivers use rustls with the ring provider; no OpenSSL is linked (the
//! `openssl-probe` crate only looks for the system's CA directory).
//!
//! Whether TLS is on is the URL's scheme for Redis (`rediss://`) and RabbitMQ
//! (`amqps://`), and `mysql.tls.require` for MySQL (its driver has no "TLS if
//! the server offers it" mode). `config::Settings::validate` refuses files
//! next to a plain connection, so a configured CA never sits unused.

use std::path::Path;

use crate::config::TlsFiles;

/// A TLS file that cannot be used; names the configuration key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: cannot read {path}: {source}")]
pub struct TlsFileError {
    /// Dotted configuration key (`redis.tls.ca_file`).
    pub key: String,
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

/// Makes ring the process-wide rustls provider. Each driver would otherwise
/// look for one on its own; with exactly one provider compiled in they agree
/// anyway, and installing it explicitly keeps it so if a dependency ever adds
/// another. Idempotent.
pub fn install_crypto_provider() {
    // Err means a provider is already installed: the one from an earlier call.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The bytes of the file `path` that the configuration key `key` names.
pub fn read_file(key: &str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|source| TlsFileError {
        key: key.to_string(),
        path: path.display().to_string(),
        source,
    })
}

/// One dependency's `tls` files (`redis.tls`, `amqp.tls`), read.
pub struct SectionFiles {
    /// `ca_file`'s bytes.
    pub ca: Option<Vec<u8>>,
    /// `cert_file`'s and `key_file`'s bytes, when both are set.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

/// Reads the files of `tls`, the `section` of the configuration it is
/// (`redis`, `amqp`): CA first, then certificate and key, each failure
/// naming its key (`<section>.tls.ca_file`, …).
pub fn read_section(section: &str, tls: &TlsFiles) -> Result<SectionFiles, TlsFileError> {
    let key = |name: &str| format!("{section}.tls.{name}");
    let ca = (tls.ca_file.as_deref())
        .map(|path| read_file(&key("ca_file"), path))
        .transpose()?;
    let client = match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(private)) => Some((
            read_file(&key("cert_file"), cert)?,
            read_file(&key("key_file"), private)?,
        )),
        _ => None,
    };
    Ok(SectionFiles { ca, client })
}
