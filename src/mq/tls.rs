//! `amqp.tls` turned into lapin's own TLS options for an `amqps://` URL:
//! `ca_file` as an extra root and the client certificate. The file reading
//! and its errors are shared with the other drivers (`crate::tls`); the
//! driver's types stay in this adapter.

use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};

use crate::config::TlsFiles;
use crate::tls::{install_crypto_provider, read_section, TlsFileError};

/// lapin's TLS options for an `amqps://` URL: `ca_file` as an extra root and
/// the client certificate. Empty (system roots, no client certificate) when
/// no file is set; ignored by lapin for `amqp://`.
pub fn amqp_tls_config(tls: &TlsFiles) -> Result<OwnedTLSConfig, TlsFileError> {
    install_crypto_provider();
    let files = read_section("amqp", tls)?;
    let cert_chain = (files.ca)
        .map(|ca| {
            String::from_utf8(ca).map_err(|e| TlsFileError {
                key: "amqp.tls.ca_file".into(),
                path: (tls.ca_file.as_deref()).map_or(String::new(), |p| p.display().to_string()),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            })
        })
        .transpose()?;
    let identity = (files.client).map(|(pem, key)| OwnedIdentity::PKCS8 { pem, key });
    Ok(OwnedTLSConfig {
        identity,
        cert_chain,
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
    }

    #[test]
    fn plain_urls_need_no_files() {
        let config = amqp_tls_config(&TlsFiles::default()).unwrap();
        assert!(config.cert_chain.is_none() && config.identity.is_none());
    }
}
