//! The `tls` subsection of `redis`, `amqp` (and the file part of `mysql.tls`):
//! which CA and client certificate a link uses, checked before anything connects.

use std::path::PathBuf;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

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
    pub(super) fn validate(
        &self,
        section: &str,
        in_use: bool,
        why_unused: &str,
    ) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use crate::config::{repo_config, Settings};

    /// A file that exists wherever the tests run: stands in for a PEM file.
    const THIS_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/config/tls_files.rs");

    #[test]
    fn tls_is_off_by_default() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert!(!s.mysql.tls.require && !s.mysql.tls.files().is_set());
        assert!(!s.redis.tls.is_set() && !s.amqp.tls.is_set());
    }

    #[test]
    fn tls_files_without_tls_are_refused_naming_the_key() {
        let cases = [
            ("STOCKD__REDIS__TLS__CA_FILE", "redis.tls.ca_file"),
            ("STOCKD__AMQP__TLS__CERT_FILE", "amqp.tls.cert_file"),
            ("STOCKD__MYSQL__TLS__KEY_FILE", "mysql.tls.key_file"),
        ];
        for (var, key) in cases {
            let vars = vec![(var.to_string(), THIS_FILE.to_string())];
            let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
    }

    #[test]
    fn a_tls_client_certificate_needs_its_key_and_files_must_exist() {
        let rediss = (
            "STOCKD__REDIS__URL".to_string(),
            "rediss://h:6380".to_string(),
        );
        let vars = vec![
            rediss.clone(),
            ("STOCKD__REDIS__TLS__CERT_FILE".into(), THIS_FILE.into()),
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
            ("STOCKD__REDIS__TLS__CA_FILE".into(), THIS_FILE.into()),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert!(s.redis.tls.ca_file.is_some());
    }
}
