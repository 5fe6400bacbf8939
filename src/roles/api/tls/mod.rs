//! TLS on the api role's listeners (`http.tls`): one rustls server config,
//! shared by the public and the admin listener, that speaks TLS 1.2 and 1.3
//! only, presents the certificate read last ([`certs`]), asks for a client
//! certificate when `http.tls.client_ca_file` is set (mutual TLS: a client
//! without a valid one fails the handshake), and re-reads its files on
//! SIGHUP ([`reload`]).
//!
//! A verified client certificate names its client: the subject's Common Name
//! is kept with the connection as [`PeerSubject`], which the auth check reads
//! in place of a bearer token (`auth.clients[].cert_subject`).

pub mod certs;
pub mod reload;

use std::any::Any;
use std::sync::Arc;

use actix_web::dev::Extensions;
use actix_web::rt::net::TcpStream;
use anyhow::Context;
use rustls::ServerConfig;

use super::auth::PeerSubject;
use crate::config::ListenerTls;
use certs::ListenerCerts;

/// The listeners' TLS: the server config both listeners use and the
/// certificates behind it (for SIGHUP).
pub struct ListenerTlsConfig {
    pub server: ServerConfig,
    pub certs: Arc<ListenerCerts>,
}

/// Builds the listeners' TLS from `tls` (its `cert_file` is set). Errors name
/// the configuration key at fault.
pub fn server_config(tls: &ListenerTls) -> anyhow::Result<ListenerTlsConfig> {
    crate::tls::install_crypto_provider();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = ListenerCerts::load(tls, provider.clone())?;
    let versions = [&rustls::version::TLS13, &rustls::version::TLS12];
    let builder = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .context("http.tls: TLS 1.2 and 1.3 with the ring provider")?;
    let builder = if certs.requires_client_certificates() {
        builder.with_client_cert_verifier(certs.clone())
    } else {
        builder.with_no_client_auth()
    };
    let mut server = builder.with_cert_resolver(certs.clone());
    if certs.requires_client_certificates() {
        forget_sessions(&mut server);
    }
    Ok(ListenerTlsConfig { server, certs })
}

/// No session resumption on a mutual-TLS listener: a resumed session carries
/// the client certificate verified at its first handshake, so after a
/// SIGHUP that rotates `client_ca_file` a client of the old CA would stay
/// authenticated for as long as it resumes. Every connection verifies its
/// certificate against the CA in force (a full handshake per connection;
/// service clients keep their connections alive).
fn forget_sessions(server: &mut ServerConfig) {
    server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    server.send_tls13_tickets = 0;
}

/// actix's per-connection hook: keeps the subject CN of a verified client
/// certificate with the connection (plain connections and TLS without client
/// certificates keep nothing).
pub fn remember_peer_subject(conn: &dyn Any, data: &mut Extensions) {
    let Some(stream) = conn.downcast_ref::<actix_tls::accept::rustls_0_23::TlsStream<TcpStream>>()
    else {
        return;
    };
    let (_, session) = stream.get_ref();
    let leaf = session.peer_certificates().and_then(|chain| chain.first());
    if let Some(cn) = leaf.and_then(|cert| subject_common_name(cert.as_ref())) {
        // The certificate's CN names the client (`auth.clients[].cert_subject`).
        data.insert(PeerSubject(cn));
    }
}

/// The first CN of the subject of a DER certificate.
pub fn subject_common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a mutual-TLS listener's config gets: nothing stored to resume
    /// from, no TLS 1.3 ticket sent (the defaults do both).
    #[test]
    fn a_mutual_tls_listener_resumes_no_session() {
        #[derive(Debug)]
        struct NoCert;
        impl rustls::server::ResolvesServerCert for NoCert {
            fn resolve(
                &self,
                _: rustls::server::ClientHello<'_>,
            ) -> Option<Arc<rustls::sign::CertifiedKey>> {
                None
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(NoCert));
        assert!(server.session_storage.can_cache() && server.send_tls13_tickets > 0);
        forget_sessions(&mut server);
        assert!(!server.session_storage.can_cache());
        assert_eq!(server.send_tls13_tickets, 0);
    }

    #[test]
    fn a_certificate_without_der_names_nobody() {
        assert_eq!(subject_common_name(b"not a certificate"), None);
    }
}
