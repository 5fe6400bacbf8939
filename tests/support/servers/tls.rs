//! The server side of a TLS-only private server: which certificate it shows
//! and which CA its clients' certificates must chain to (`tests/it/tls.rs`
//! makes them at test time). Every starter with a TLS option takes one.

use std::path::PathBuf;

/// PEM files of a TLS-only server; clients must show a certificate the CA signed.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}
