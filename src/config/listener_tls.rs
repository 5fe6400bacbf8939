//! `http.tls`: TLS on stockd's own listeners (the public one on `http.bind`
//! and the admin one on `admin.bind`), and optionally mutual TLS. Checked at
//! start-up — both halves of the pair, every file present and holding what its
//! key says — so a typo is refused by its key before anything listens.
//!
//! Off by default: a proxy in front may terminate TLS (docs/operations.md,
//! "TLS on the listeners"); production does not require it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};

/// PEM files of the listeners' TLS. All null: plain HTTP.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerTls {
    /// Server certificate chain, leaf first; needs `key_file`. Re-read on SIGHUP.
    pub cert_file: Option<PathBuf>,
    /// Private key of `cert_file` (PKCS#8, PKCS#1 or SEC1). Re-read on SIGHUP.
    pub key_file: Option<PathBuf>,
    /// CA whose certificates clients must present (mutual TLS); null: no
    /// client certificate is asked for. Needs `cert_file`. Re-read on SIGHUP.
    pub client_ca_file: Option<PathBuf>,
}

impl ListenerTls {
    /// Whether the listeners speak TLS.
    pub fn is_on(&self) -> bool {
        self.cert_file.is_some()
    }

    /// Cert and key together, a client CA only with them, and each file
    /// readable and holding a certificate (or key) in PEM.
    pub fn validate(&self) -> anyhow::Result<()> {
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                read_certificates("http.tls.cert_file", cert)?;
                read_private_key("http.tls.key_file", key)?;
            }
            (Some(_), None) => {
                bail!("invalid configuration key `http.tls.key_file`: required with http.tls.cert_file")
            }
            (None, Some(_)) => {
                bail!("invalid configuration key `http.tls.cert_file`: required with http.tls.key_file")
            }
            (None, None) => {}
        }
        if let Some(ca) = &self.client_ca_file {
            if !self.is_on() {
                bail!(
                    "invalid configuration key `http.tls.client_ca_file`: set, but \
                     http.tls.cert_file is not (mutual TLS needs TLS)"
                );
            }
            read_certificates("http.tls.client_ca_file", ca)?;
        }
        Ok(())
    }
}

/// The certificates of the PEM file `path`; at least one. Errors name `key`.
pub fn read_certificates(key: &str, path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let refuse = || format!("invalid configuration key `{key}`: {}", path.display());
    let bytes = std::fs::read(path).with_context(refuse)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .with_context(refuse)?;
    if certs.is_empty() {
        bail!("{}: no PEM certificate in it", refuse());
    }
    Ok(certs)
}

/// The first private key of the PEM file `path`. Errors name `key`, never the
/// key material.
pub fn read_private_key(key: &str, path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    let refuse = || format!("invalid configuration key `{key}`: {}", path.display());
    let bytes = std::fs::read(path).with_context(refuse)?;
    PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|_| anyhow::anyhow!("{}: no PEM private key in it", refuse()))
}

#[cfg(test)]
mod tests {
    use crate::config::{repo_config, Settings};

    /// A file that exists but is no PEM.
    const NOT_PEM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/config/listener_tls.rs");

    fn refusal(vars: &[(&str, &str)]) -> String {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        format!("{err:#}")
    }

    #[test]
    fn listener_tls_is_off_by_default() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert!(!s.http.tls.is_on());
    }

    #[test]
    fn a_half_pair_a_lone_client_ca_or_a_file_without_pem_is_refused_by_its_key() {
        let err = refusal(&[("STOCKD__HTTP__TLS__CERT_FILE", NOT_PEM)]);
        assert!(err.contains("http.tls.key_file"), "{err}");
        let err = refusal(&[("STOCKD__HTTP__TLS__KEY_FILE", NOT_PEM)]);
        assert!(err.contains("http.tls.cert_file"), "{err}");
        let err = refusal(&[("STOCKD__HTTP__TLS__CLIENT_CA_FILE", NOT_PEM)]);
        assert!(err.contains("http.tls.client_ca_file"), "{err}");
        let err = refusal(&[
            ("STOCKD__HTTP__TLS__CERT_FILE", NOT_PEM),
            ("STOCKD__HTTP__TLS__KEY_FILE", NOT_PEM),
        ]);
        assert!(
            err.contains("http.tls.cert_file") && err.contains("no PEM"),
            "{err}"
        );
        let err = refusal(&[
            ("STOCKD__HTTP__TLS__CERT_FILE", "/nonexistent/cert.pem"),
            ("STOCKD__HTTP__TLS__KEY_FILE", "/nonexistent/key.pem"),
        ]);
        assert!(err.contains("http.tls.cert_file"), "{err}");
    }
}
