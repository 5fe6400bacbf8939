//! The known clients (`auth.clients`) as a lookup table: a presented bearer
//! token is hashed with SHA-256 and compared with every entry's hash in
//! constant time, so neither the answer time nor the config tells anything
//! about a token; a verified certificate subject is looked up by equality
//! (it is not a secret).

use std::sync::Arc;

use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::config::{ClientSettings, Scope};

/// Bytes of a SHA-256 digest.
const DIGEST_LEN: usize = 32;

/// Who a request comes from, once authenticated: put in the request's
/// extensions for the metrics (`client` label) and the audit trail.
#[derive(Debug, Clone)]
pub struct ClientName(pub Arc<str>);

/// One entry of the table.
struct Entry {
    name: Arc<str>,
    /// SHA-256 of the token; `None` for a client named by certificate.
    digest: Option<[u8; DIGEST_LEN]>,
    cert_subject: Option<String>,
    scopes: Vec<Scope>,
}

/// A client found in the table: its position (the per-client limit's key)
/// and what it may do.
#[derive(Debug, Clone)]
pub struct Known {
    pub index: usize,
    pub name: Arc<str>,
    scopes: Vec<Scope>,
}

impl Known {
    pub fn may(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }
}

/// `auth.clients`, ready for lookups.
pub struct ClientTable {
    entries: Vec<Entry>,
}

impl ClientTable {
    /// Builds the table from validated settings (64 hex digits per hash).
    pub fn new(clients: &[ClientSettings]) -> Self {
        let entries = clients
            .iter()
            .map(|c| Entry {
                name: Arc::from(c.name.as_str()),
                digest: c.token_sha256.as_deref().map(digest_from_hex),
                cert_subject: c.cert_subject.clone(),
                scopes: c.scopes.clone(),
            })
            .collect();
        Self { entries }
    }

    /// The client whose token hashes to an entry's hash. Every entry is
    /// compared, in constant time, whichever matches.
    pub fn by_token(&self, token: &str) -> Option<Known> {
        let presented = sha256(token.as_bytes());
        // 0 = none; i + 1 = entry i (selected without a data-dependent branch).
        let mut found: u64 = 0;
        for (i, entry) in self.entries.iter().enumerate() {
            let Some(digest) = &entry.digest else {
                continue;
            };
            let same = presented.ct_eq(digest);
            found = u64::conditional_select(&found, &(i as u64 + 1), same);
        }
        let index = usize::try_from(found.checked_sub(1)?).ok()?;
        Some(self.known(index))
    }

    /// The client named by a verified TLS client certificate's subject.
    pub fn by_subject(&self, subject: &str) -> Option<Known> {
        let index = self
            .entries
            .iter()
            .position(|e| e.cert_subject.as_deref() == Some(subject))?;
        Some(self.known(index))
    }

    /// The configured names (the `client` label's bounded set of values).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| &*e.name)
    }

    fn known(&self, index: usize) -> Known {
        let entry = &self.entries[index];
        Known {
            index,
            name: entry.name.clone(),
            scopes: entry.scopes.clone(),
        }
    }
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; DIGEST_LEN] {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; DIGEST_LEN];
    out.copy_from_slice(digest.as_ref());
    out
}

/// SHA-256 of `bytes` as lowercase hex, as `sha256sum` prints it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    sha256(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest of a validated 64-hex-digit string (upper or lower case).
fn digest_from_hex(hex: &str) -> [u8; DIGEST_LEN] {
    let mut out = [0u8; DIGEST_LEN];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .expect("auth.clients[].token_sha256 was validated as hex");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(name: &str, token: &str, scopes: Vec<Scope>) -> ClientSettings {
        ClientSettings {
            name: name.into(),
            token_sha256: Some(sha256_hex(token.as_bytes()).to_uppercase()),
            cert_subject: None,
            scopes,
        }
    }

    #[test]
    fn the_hash_is_what_sha256sum_prints() {
        // printf %s test | sha256sum
        assert_eq!(
            sha256_hex(b"test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
    }

    #[test]
    fn a_token_finds_its_client_and_nothing_else_does() {
        let mut by_cert = client("edge", "x", vec![Scope::Read]);
        by_cert.token_sha256 = None;
        by_cert.cert_subject = Some("CN=edge".into());
        let table = ClientTable::new(&[
            client("orders", "tok-orders", vec![Scope::Reserve, Scope::Read]),
            client("ops", "tok-ops", vec![Scope::Admin]),
            by_cert,
        ]);
        let orders = table.by_token("tok-orders").unwrap();
        assert_eq!(&*orders.name, "orders");
        assert!(orders.may(Scope::Reserve) && !orders.may(Scope::Lifecycle));
        assert_eq!(table.by_token("tok-ops").unwrap().index, 1);
        assert!(table.by_token("tok-orderz").is_none());
        assert!(table.by_token("").is_none());
        assert_eq!(&*table.by_subject("CN=edge").unwrap().name, "edge");
        assert!(table.by_subject("CN=other").is_none());
        assert_eq!(table.names().count(), 3);
    }
}
