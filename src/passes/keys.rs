//! The key ring: every key of `passes.keys` by its id (the `kid` a pass
//! names), each with the one algorithm its kind allows — an HS256 secret
//! verifies HS256 only, an Ed25519 key EdDSA only — so a pass cannot pick how
//! it is checked (the `alg` confusion of RFC 8725 §2.1). An Ed25519 private
//! key verifies with its public half. The issuer key, when set, signs.

use std::collections::HashMap;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey};

use super::known_headers::KnownHeaders;
use super::verify::decode_part;
use crate::config::{KeyMaterial, PassKeyMaterial, PassSettings};

/// A key that verifies: its algorithm and how a signature is checked.
pub(super) struct Verifier {
    alg: Algorithm,
    /// `alg` as a header names it.
    alg_name: &'static str,
    check: SignatureCheck,
}

/// How a key checks a pass's signature over `<header>.<claims>`.
enum SignatureCheck {
    /// HS256: ring's HMAC-SHA256 key, derived from the secret once here.
    /// `jsonwebtoken::crypto::verify` derives it again on every call (two
    /// SHA-256 blocks, a fifth of what verifying a pass costs) and compares
    /// base64 text; ring compares the tag in constant time.
    Hmac(ring::hmac::Key),
    /// EdDSA: jsonwebtoken's check (ring's Ed25519 underneath).
    Jwt(DecodingKey),
}

/// Why a signature could not be checked at all (not base64url, or a key
/// jsonwebtoken refuses).
pub(super) struct Unreadable;

impl Verifier {
    /// The `alg` a pass's header must name for this key (RFC 7518's name).
    pub(super) fn alg_name(&self) -> &'static str {
        self.alg_name
    }

    /// Whether `signature` (base64url, the token's third part) signs
    /// `message` (its first two parts and the dot between them).
    pub(super) fn signs(&self, message: &[u8], signature: &str) -> Result<bool, Unreadable> {
        match &self.check {
            SignatureCheck::Hmac(key) => {
                let mut stack = [0u8; 64];
                let tag = decode_part(signature, &mut stack).map_err(|_| Unreadable)?;
                Ok(ring::hmac::verify(key, message, &tag).is_ok())
            }
            SignatureCheck::Jwt(key) => {
                jsonwebtoken::crypto::verify(signature, message, key, self.alg)
                    .map_err(|_| Unreadable)
            }
        }
    }
}

/// The key `POST /v1/passes` signs with.
pub(super) struct Signer {
    pub(super) kid: String,
    pub(super) alg: Algorithm,
    pub(super) key: EncodingKey,
}

/// The keys of `passes.keys`, built once at start-up.
pub struct KeyRing {
    /// Every key that verifies, in the order of `passes.keys`.
    pub(super) verifiers: Vec<Verifier>,
    /// The index in `verifiers` of each key id (a header's `kid`).
    pub(super) by_kid: HashMap<String, usize>,
    /// Header texts already read (`known_headers.rs`).
    pub(super) known_headers: KnownHeaders,
    pub(super) signer: Option<Signer>,
}

impl std::fmt::Debug for KeyRing {
    /// The ids only: never a byte of a key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<&String> = self.by_kid.keys().collect();
        ids.sort();
        f.debug_struct("KeyRing")
            .field("kids", &ids)
            .field("issuer", &self.signer.as_ref().map(|s| &s.kid))
            .finish()
    }
}

impl KeyRing {
    /// Reads `passes.keys` (their files) and builds the ring; a refusal names
    /// its key, as the config check does.
    pub fn from_settings(settings: &PassSettings) -> anyhow::Result<Self> {
        let keys = settings.read_keys()?;
        Ok(Self::new(&keys, settings.issuer_key.as_deref()))
    }

    /// The ring of `keys`, signing with the one named `issuer` (if it can).
    pub fn new(keys: &[PassKeyMaterial], issuer: Option<&str>) -> Self {
        let mut verifiers = Vec::with_capacity(keys.len());
        let mut by_kid = HashMap::with_capacity(keys.len());
        let mut signer = None;
        for k in keys {
            let (alg, alg_name, check) = match &k.material {
                KeyMaterial::Hs256 { secret } => (
                    Algorithm::HS256,
                    "HS256",
                    SignatureCheck::Hmac(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret)),
                ),
                KeyMaterial::Ed25519Public { public }
                | KeyMaterial::Ed25519Private { public, .. } => {
                    // jsonwebtoken's "DER" of an Ed25519 public key is its 32 bytes.
                    let key = DecodingKey::from_ed_der(public);
                    (Algorithm::EdDSA, "EdDSA", SignatureCheck::Jwt(key))
                }
            };
            if issuer == Some(k.id.as_str()) {
                let key = match &k.material {
                    KeyMaterial::Hs256 { secret } => Some(EncodingKey::from_secret(secret)),
                    KeyMaterial::Ed25519Private { pkcs8, .. } => {
                        Some(EncodingKey::from_ed_der(pkcs8))
                    }
                    KeyMaterial::Ed25519Public { .. } => None,
                };
                signer = key.map(|key| Signer {
                    kid: k.id.clone(),
                    alg,
                    key,
                });
            }
            // Ids are unique (the config check); were one given twice, the
            // last would win, as a map's insert does.
            by_kid.insert(k.id.clone(), verifiers.len());
            verifiers.push(Verifier {
                alg,
                alg_name,
                check,
            });
        }
        Self {
            verifiers,
            by_kid,
            known_headers: KnownHeaders::default(),
            signer,
        }
    }

    /// A ring with no key: every pass is refused, none can be issued.
    pub fn empty() -> Self {
        Self::new(&[], None)
    }

    /// Whether `POST /v1/passes` can sign.
    pub fn can_issue(&self) -> bool {
        self.signer.is_some()
    }
}
