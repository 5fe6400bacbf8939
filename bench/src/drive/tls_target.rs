//! `stockd-bench --target https://… --ca-file <pem>`: the TLS of the one
//! target a run drives. Registered once, before the phases start, by the
//! target's address; every [`super::http_client::HttpConn`] to that address
//! then speaks TLS, so the phases, checks and metric readers that carry a
//! `SocketAddr` need not know. The bench's own child stockds stay plain.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

/// The TLS target of this run: its address, the name its certificate must
/// carry and the client config trusting `--ca-file`.
pub struct TlsTarget {
    pub addr: SocketAddr,
    pub server_name: ServerName<'static>,
    pub config: Arc<rustls::ClientConfig>,
}

static TARGET: OnceLock<TlsTarget> = OnceLock::new();

/// Registers `addr` (reached as `host`) as a TLS target trusting the CA
/// certificates of `ca_file`. One target per run: a second call is an error.
pub fn register(addr: SocketAddr, host: &str, ca_file: &Path) -> anyhow::Result<()> {
    stockd::tls::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca_file)
        .with_context(|| format!("--ca-file {}", ca_file.display()))?;
    for cert in certs {
        let cert = cert.with_context(|| format!("--ca-file {}", ca_file.display()))?;
        roots.add(cert).context("--ca-file: not a CA certificate")?;
    }
    anyhow::ensure!(
        !roots.is_empty(),
        "--ca-file {}: no PEM certificate",
        ca_file.display()
    );
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server_name = ServerName::try_from(host.to_string())
        .with_context(|| format!("--target host {host} is not a DNS name or IP address"))?;
    let target = TlsTarget {
        addr,
        server_name,
        config: Arc::new(config),
    };
    TARGET
        .set(target)
        .map_err(|_| anyhow::anyhow!("a TLS target is already registered for this run"))
}

/// The TLS of `addr`, when it is the registered target.
pub fn for_addr(addr: SocketAddr) -> Option<&'static TlsTarget> {
    TARGET.get().filter(|target| target.addr == addr)
}
