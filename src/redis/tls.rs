//! `redis.tls` turned into the Redis client's own TLS options: a `rediss://`
//! client that trusts only `ca_file` and presents the client certificate.
//! The file reading and its errors are shared with the other drivers
//! (`crate::tls`); the driver's types stay in this adapter.

use deadpool_redis::redis;

use crate::config::TlsFiles;
use crate::tls::{install_crypto_provider, read_section, TlsFileError};

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
    let files = read_section("redis", tls)?;
    let root_cert = files.ca;
    let client_tls = (files.client).map(|(client_cert, client_key)| redis::ClientTlsConfig {
        client_cert,
        client_key,
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_named_by_its_key() {
        let tls = TlsFiles {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..TlsFiles::default()
        };
        let err = redis_client("rediss://127.0.0.1:1", &tls).unwrap_err();
        assert!(err.to_string().starts_with("redis.tls.ca_file"), "{err}");
    }

    #[test]
    fn plain_urls_need_no_files() {
        assert!(redis_client("redis://127.0.0.1:6379", &TlsFiles::default()).is_ok());
    }
}
