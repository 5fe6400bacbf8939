//! TLS to the dependencies (config `mysql.tls`, `redis.tls`, `amqp.tls`): the
//! configured CA and client certificate files turned into each driver's own
//! TLS options (MySQL's are built in `db/pool.rs`, so that driver stays
//! behind `db/`). All three drivers use rustls with the ring provider; no
//! OpenSSL is linked (the `openssl-probe` crate only looks for the system's CA
//! directory).
//!
//! Whether TLS is on is the URL's scheme for Redis (`rediss://`) and RabbitMQ
//! (`amqps://`), and `mysql.tls.require` for MySQL (its driver has no "TLS if
//! the server offers it" mode). `config::Settings::validate` refuses files
//! next to a plain connection, so a configured CA never sits unused.

use std::path::Path;

use deadpool_redis::redis;
use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};

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

/// The Redis client of `url`: with a `rediss://` URL and `redis.tls` files, a
/// client whose TLS trusts only `ca_file` and presents the client certificate.
pub fn redis_client(url: &str, tls: &TlsFiles) -> Result<redis::Client, TlsClientError> {
    match redis_certificates(url, tls)? {
        Some(certificates) => Ok(redis::Client::build_with_tls(url, certificates)?),
        None => Ok(redis::Client::open(url)?),
    }
}

/// The certificates of a `rediss://` connection shaped by `redis.tls`; `None`
/// when the URL is plain or no file is set (system roots).
pub fn redis_certificates(
    url: &str,
    tls: &TlsFiles,
) -> Result<Option<redis::TlsCertificates>, TlsClientError> {
    if !url.starts_with("rediss://") {
        return Ok(None);
    }
    install_crypto_provider();
    if !tls.is_set() {
        return Ok(None);
    }
    let root_cert = tls
        .ca_file
        .as_deref()
        .map(|p| read("redis.tls.ca_file", p))
        .transpose()?;
    let client_tls = match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
            client_cert: read("redis.tls.cert_file", cert)?,
            client_key: read("redis.tls.key_file", key)?,
        }),
        _ => None,
    };
    Ok(Some(redis::TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// Failures building the Redis client.
#[derive(Debug, thiserror::Error)]
pub enum TlsClientError {
    #[error(transparent)]
    File(#[from] TlsFileError),
    #[error("redis.url: {0}")]
    Redis(#[from] redis::RedisError),
}

/// lapin's TLS options for an `amqps://` URL: `ca_file` as an extra root and
/// the client certificate. Empty (system roots, no client certificate) when
/// no file is set; ignored by lapin for `amqp://`.
pub fn amqp_tls_config(tls: &TlsFiles) -> Result<OwnedTLSConfig, TlsFileError> {
    install_crypto_provider();
    let cert_chain = match &tls.ca_file {
        Some(ca) => Some(
            String::from_utf8(read("amqp.tls.ca_file", ca)?).map_err(|e| TlsFileError {
                key: "amqp.tls.ca_file".into(),
                path: ca.display().to_string(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            })?,
        ),
        None => None,
    };
    let identity = match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => Some(OwnedIdentity::PKCS8 {
            pem: read("amqp.tls.cert_file", cert)?,
            key: read("amqp.tls.key_file", key)?,
        }),
        _ => None,
    };
    Ok(OwnedTLSConfig {
        identity,
        cert_chain,
    })
}

fn read(key: &str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|source| TlsFileError {
        key: key.to_string(),
        path: path.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_named_by_its_key() {
        let tls = TlsFiles {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..TlsFiles::default()
        };
        let err = amqp_tls_config(&tls).unwrap_err();
        assert!(err.to_string().starts_with("amqp.tls.ca_file"), "{err}");
        let err = redis_client("rediss://127.0.0.1:1", &tls).unwrap_err();
        assert!(err.to_string().starts_with("redis.tls.ca_file"), "{err}");
    }

    #[test]
    fn plain_urls_need_no_files() {
        assert!(redis_client("redis://127.0.0.1:6379", &TlsFiles::default()).is_ok());
        let config = amqp_tls_config(&TlsFiles::default()).unwrap();
        assert!(config.cert_chain.is_none() && config.identity.is_none());
    }
}
