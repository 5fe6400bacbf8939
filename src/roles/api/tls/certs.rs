//! The listeners' certificate and client CA behind a lock that SIGHUP swaps:
//! rustls asks [`ListenerCerts`] for the certificate at every handshake and
//! for the client verifier at every mutual-TLS handshake, so a reload reaches
//! new connections at once while open ones keep the session they negotiated.

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::Context;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use crate::config::{read_certificates, read_private_key, ListenerTls};

/// The files of `http.tls` and what was last read from them.
pub struct ListenerCerts {
    files: ListenerTls,
    provider: Arc<CryptoProvider>,
    /// The server certificate and key every new handshake presents.
    certified: RwLock<Arc<CertifiedKey>>,
    /// Checks client certificates against `client_ca_file`; `None` without it.
    client_verifier: Option<RwLock<Arc<dyn ClientCertVerifier>>>,
}

impl std::fmt::Debug for ListenerCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerCerts")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ListenerCerts {
    /// Reads the files of `tls` (which has `cert_file` and `key_file`); errors
    /// name the key at fault.
    pub fn load(tls: &ListenerTls, provider: Arc<CryptoProvider>) -> anyhow::Result<Arc<Self>> {
        let certified = read_certified_key(tls, &provider)?;
        let client_verifier = match &tls.client_ca_file {
            Some(ca) => Some(RwLock::new(read_client_verifier(ca, &provider)?)),
            None => None,
        };
        Ok(Arc::new(Self {
            files: tls.clone(),
            provider,
            certified: RwLock::new(certified),
            client_verifier,
        }))
    }

    /// Re-reads every file; on any failure nothing changes (the old
    /// certificate and CA stay in use) and the error says which key failed.
    pub fn reload(&self) -> anyhow::Result<()> {
        let certified = read_certified_key(&self.files, &self.provider)?;
        let verifier = match &self.files.client_ca_file {
            Some(ca) => Some(read_client_verifier(ca, &self.provider)?),
            None => None,
        };
        *self
            .certified
            .write()
            .unwrap_or_else(PoisonError::into_inner) = certified;
        if let (Some(slot), Some(verifier)) = (&self.client_verifier, verifier) {
            *slot.write().unwrap_or_else(PoisonError::into_inner) = verifier;
        }
        Ok(())
    }

    /// Whether clients must present a certificate (mutual TLS).
    pub fn requires_client_certificates(&self) -> bool {
        self.client_verifier.is_some()
    }

    fn verifier(&self) -> Arc<dyn ClientCertVerifier> {
        let slot = self
            .client_verifier
            .as_ref()
            .expect("rustls asks for the client verifier only when one was configured");
        slot.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

fn read_certified_key(
    tls: &ListenerTls,
    provider: &CryptoProvider,
) -> anyhow::Result<Arc<CertifiedKey>> {
    let cert_path = tls
        .cert_file
        .as_ref()
        .context("http.tls.cert_file is not set")?;
    let key_path = tls
        .key_file
        .as_ref()
        .context("http.tls.key_file is not set")?;
    let chain = read_certificates("http.tls.cert_file", cert_path)?;
    let key = read_private_key("http.tls.key_file", key_path)?;
    let certified = CertifiedKey::from_der(chain, key, provider).with_context(|| {
        format!(
            "invalid configuration key `http.tls.key_file`: {} is not the key of {}",
            key_path.display(),
            cert_path.display()
        )
    })?;
    Ok(Arc::new(certified))
}

fn read_client_verifier(
    ca: &Path,
    provider: &Arc<CryptoProvider>,
) -> anyhow::Result<Arc<dyn ClientCertVerifier>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_certificates("http.tls.client_ca_file", ca)? {
        roots
            .add(cert)
            .context("invalid configuration key `http.tls.client_ca_file`: not a CA certificate")?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .context("invalid configuration key `http.tls.client_ca_file`")
}

impl ResolvesServerCert for ListenerCerts {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.certified
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        )
    }
}

/// Mutual TLS through whatever CA was read last. The hint list of acceptable
/// CAs is sent empty (it would have to borrow from the swapped verifier); an
/// empty list tells a client to send the certificate it has.
impl ClientCertVerifier for ListenerCerts {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.verifier()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}
