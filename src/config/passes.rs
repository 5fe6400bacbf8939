//! `passes`: the keys admission passes are signed with (contract, "Passes").
//! A waiting room in front of stockd hands each buyer it lets through a
//! signed token; stockd verifies it in memory with these keys. Several keys
//! at once, each named by the `kid` a pass carries, so a key is rotated by
//! adding the new one, moving the signers over, then removing the old one.
//!
//! The config holds paths, never key material: the files are read here, once,
//! at start-up (and by `stockd config check`), so an unreadable file, a PEM
//! that holds no Ed25519 key of the right kind, or an entry naming two kinds
//! stops the process naming its key. What was read is [`PassKeyMaterial`],
//! whose `Debug` prints no byte of a secret; `src/passes/` builds the
//! verifying and signing keys from it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

/// Fewest bytes of an HS256 secret: RFC 7518 §3.2 asks for a key at least
/// as long as the hash (256 bits); a shorter one is guessable offline from
/// any pass.
pub const HS256_SECRET_MIN_BYTES: usize = 32;

/// The DER header of an Ed25519 public key in SPKI form (RFC 8410 §4): the
/// 32 key bytes follow it. The one shape such a key has, so it is compared
/// whole rather than parsed.
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Bytes of an Ed25519 public key.
pub const ED25519_PUBLIC_KEY_BYTES: usize = 32;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PassSettings {
    /// The keys passes may be signed with; empty: no pass verifies (a SKU
    /// that requires one admits nobody).
    pub keys: Vec<PassKeySettings>,
    /// The `id` of the key `POST /v1/passes` signs with (an HS256 secret or
    /// an Ed25519 private key); null: that route answers 503.
    pub issuer_key: Option<String>,
}

/// One key: its id and exactly one file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PassKeySettings {
    /// The `kid` of the passes it verifies: 1–64 of `[A-Za-z0-9_.:-]`, unique.
    pub id: String,
    /// A shared secret (HS256): the file's bytes, one trailing newline trimmed.
    #[serde(default)]
    pub hs256_secret_file: Option<PathBuf>,
    /// An Ed25519 public key (EdDSA), PEM `PUBLIC KEY` (SPKI): verifies only.
    #[serde(default)]
    pub ed25519_public_key_file: Option<PathBuf>,
    /// An Ed25519 private key (EdDSA), PEM `PRIVATE KEY` (PKCS#8): verifies,
    /// and can sign as `issuer_key`.
    #[serde(default)]
    pub ed25519_private_key_file: Option<PathBuf>,
}

/// What one key file held, checked.
#[derive(Clone)]
pub enum KeyMaterial {
    /// An HS256 shared secret.
    Hs256 { secret: Vec<u8> },
    /// An Ed25519 public key (its 32 bytes).
    Ed25519Public {
        public: [u8; ED25519_PUBLIC_KEY_BYTES],
    },
    /// An Ed25519 private key (PKCS#8 DER) and its public key.
    Ed25519Private {
        pkcs8: Vec<u8>,
        public: [u8; ED25519_PUBLIC_KEY_BYTES],
    },
}

/// A key as read from its file, by id.
#[derive(Clone)]
pub struct PassKeyMaterial {
    pub id: String,
    pub material: KeyMaterial,
}

impl PassKeyMaterial {
    /// Whether it can sign a pass (`passes.issuer_key`).
    pub fn can_sign(&self) -> bool {
        !matches!(self.material, KeyMaterial::Ed25519Public { .. })
    }
}

impl std::fmt::Debug for PassKeyMaterial {
    /// The id and the kind, never a byte of the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.material {
            KeyMaterial::Hs256 { .. } => "hs256 secret",
            KeyMaterial::Ed25519Public { .. } => "ed25519 public",
            KeyMaterial::Ed25519Private { .. } => "ed25519 private",
        };
        write!(f, "PassKeyMaterial({}: {kind})", self.id)
    }
}

impl PassSettings {
    /// Every entry well formed and its file readable and holding its kind,
    /// ids unique, and `issuer_key` one of them that can sign.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.read_keys().map(drop)
    }

    /// Reads and checks every key file; each refusal names its key.
    pub fn read_keys(&self) -> anyhow::Result<Vec<PassKeyMaterial>> {
        let mut ids = HashSet::new();
        let mut keys = Vec::with_capacity(self.keys.len());
        for (i, entry) in self.keys.iter().enumerate() {
            let key = format!("passes.keys[{i}]");
            if crate::domain::RequestId::parse(&entry.id).is_err() {
                bail!("invalid configuration key `{key}.id`: 1-64 characters of [A-Za-z0-9_.:-]");
            }
            if !ids.insert(entry.id.as_str()) {
                bail!(
                    "invalid configuration key `{key}.id`: `{}` is already the id of another key",
                    entry.id
                );
            }
            keys.push(PassKeyMaterial {
                id: entry.id.clone(),
                material: entry.read(&key)?,
            });
        }
        if let Some(issuer) = &self.issuer_key {
            match keys.iter().find(|k| &k.id == issuer) {
                None => bail!(
                    "invalid configuration key `passes.issuer_key`: `{issuer}` is not the id of \
                     a key of passes.keys"
                ),
                Some(k) if !k.can_sign() => bail!(
                    "invalid configuration key `passes.issuer_key`: `{issuer}` is an Ed25519 \
                     public key, which cannot sign; name an HS256 secret or an Ed25519 private key"
                ),
                Some(_) => {}
            }
        }
        Ok(keys)
    }
}

impl PassKeySettings {
    /// The one file of the entry, read as its kind.
    fn read(&self, key: &str) -> anyhow::Result<KeyMaterial> {
        let files = [
            ("hs256_secret_file", &self.hs256_secret_file),
            ("ed25519_public_key_file", &self.ed25519_public_key_file),
            ("ed25519_private_key_file", &self.ed25519_private_key_file),
        ];
        let mut set = files
            .iter()
            .filter_map(|(name, path)| Some((*name, path.as_ref()?)));
        let (Some((name, path)), None) = (set.next(), set.next()) else {
            bail!(
                "invalid configuration key `{key}`: needs exactly one of hs256_secret_file, \
                 ed25519_public_key_file and ed25519_private_key_file"
            );
        };
        let key = format!("{key}.{name}");
        let bytes = std::fs::read(path).with_context(|| {
            format!(
                "invalid configuration key `{key}`: cannot read {}",
                path.display()
            )
        })?;
        match name {
            "hs256_secret_file" => hs256(&key, bytes),
            "ed25519_public_key_file" => ed25519_public(&key, path, &bytes),
            _ => ed25519_private(&key, path, &bytes),
        }
    }
}

/// The file's bytes without the newline editors and `echo` leave at its end.
fn hs256(key: &str, mut secret: Vec<u8>) -> anyhow::Result<KeyMaterial> {
    if secret.last() == Some(&b'\n') {
        secret.pop();
        if secret.last() == Some(&b'\r') {
            secret.pop();
        }
    }
    if secret.len() < HS256_SECRET_MIN_BYTES {
        bail!(
            "invalid configuration key `{key}`: an HS256 secret needs at least \
             {HS256_SECRET_MIN_BYTES} bytes (it has {})",
            secret.len()
        );
    }
    Ok(KeyMaterial::Hs256 { secret })
}

/// The DER of the file's one PEM block, which must carry `tag`.
fn pem_block(key: &str, path: &Path, bytes: &[u8], tag: &str) -> anyhow::Result<Vec<u8>> {
    let block = pem::parse(bytes).map_err(|e| {
        anyhow::anyhow!(
            "invalid configuration key `{key}`: {} holds no PEM block ({e})",
            path.display()
        )
    })?;
    if block.tag() != tag {
        bail!(
            "invalid configuration key `{key}`: {} holds a PEM `{}`, not a `{tag}`",
            path.display(),
            block.tag()
        );
    }
    Ok(block.into_contents())
}

fn ed25519_public(key: &str, path: &Path, bytes: &[u8]) -> anyhow::Result<KeyMaterial> {
    let der = pem_block(key, path, bytes, "PUBLIC KEY")?;
    let public = der
        .strip_prefix(&ED25519_SPKI_PREFIX[..])
        .and_then(|raw| <[u8; ED25519_PUBLIC_KEY_BYTES]>::try_from(raw).ok());
    match public {
        Some(public) => Ok(KeyMaterial::Ed25519Public { public }),
        None => bail!(
            "invalid configuration key `{key}`: {} is not an Ed25519 public key (SPKI, \
             `openssl pkey -pubout`)",
            path.display()
        ),
    }
}

fn ed25519_private(key: &str, path: &Path, bytes: &[u8]) -> anyhow::Result<KeyMaterial> {
    use ring::signature::KeyPair;
    let pkcs8 = pem_block(key, path, bytes, "PRIVATE KEY")?;
    let pair = ring::signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(&pkcs8);
    let public = pair.ok().and_then(|pair| {
        <[u8; ED25519_PUBLIC_KEY_BYTES]>::try_from(pair.public_key().as_ref()).ok()
    });
    match public {
        Some(public) => Ok(KeyMaterial::Ed25519Private { pkcs8, public }),
        None => bail!(
            "invalid configuration key `{key}`: {} is not an Ed25519 private key (PKCS#8, \
             `openssl genpkey -algorithm ed25519`)",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file under the system temp dir, unique to `name`.
    fn file(name: &str, content: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("stockd-pass-{}-{name}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        path
    }

    fn private_pem() -> String {
        let rng = ring::rand::SystemRandom::new();
        let doc = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        pem::encode(&pem::Pem::new("PRIVATE KEY", doc.as_ref().to_vec()))
    }

    fn entry(id: &str) -> PassKeySettings {
        PassKeySettings {
            id: id.into(),
            hs256_secret_file: None,
            ed25519_public_key_file: None,
            ed25519_private_key_file: None,
        }
    }

    fn refusal(settings: PassSettings) -> String {
        format!("{:#}", settings.read_keys().unwrap_err())
    }

    #[test]
    fn each_kind_is_read_and_a_secret_loses_one_newline() {
        let secret = file("hs", b"0123456789abcdef0123456789abcdef\n");
        let private = file("ed", private_pem().as_bytes());
        let mut hs = entry("hs-1");
        hs.hs256_secret_file = Some(secret);
        let mut ed = entry("ed-1");
        ed.ed25519_private_key_file = Some(private);
        let settings = PassSettings {
            keys: vec![hs, ed],
            issuer_key: Some("ed-1".into()),
        };
        let keys = settings.read_keys().unwrap();
        match &keys[0].material {
            KeyMaterial::Hs256 { secret } => assert_eq!(secret.len(), 32),
            _ => panic!("not hs256"),
        }
        assert!(matches!(
            keys[1].material,
            KeyMaterial::Ed25519Private { .. }
        ));
        let shown = format!("{keys:?}");
        assert!(!shown.contains("0123456789"), "{shown}");
    }

    #[test]
    fn each_bad_entry_is_refused_naming_its_key() {
        let mut two = entry("a");
        two.hs256_secret_file = Some(file("two", &[b'x'; 40]));
        two.ed25519_public_key_file = Some(file("two-pub", b"x"));
        let err = refusal(PassSettings {
            keys: vec![two],
            issuer_key: None,
        });
        assert!(
            err.contains("`passes.keys[0]`") && err.contains("exactly one"),
            "{err}"
        );

        let mut missing = entry("a");
        missing.hs256_secret_file = Some("/nonexistent/stockd-secret".into());
        let err = refusal(PassSettings {
            keys: vec![missing],
            issuer_key: None,
        });
        assert!(err.contains("passes.keys[0].hs256_secret_file"), "{err}");

        let mut short = entry("a");
        short.hs256_secret_file = Some(file("short", b"tooshort"));
        let err = refusal(PassSettings {
            keys: vec![short],
            issuer_key: None,
        });
        assert!(err.contains("at least 32 bytes"), "{err}");

        let mut bad_pem = entry("a");
        bad_pem.ed25519_public_key_file = Some(file("bad-pem", b"not a pem"));
        let err = refusal(PassSettings {
            keys: vec![bad_pem],
            issuer_key: None,
        });
        assert!(
            err.contains("passes.keys[0].ed25519_public_key_file"),
            "{err}"
        );

        // A private key where a public one is named: the PEM tag says so.
        let mut swapped = entry("a");
        swapped.ed25519_public_key_file = Some(file("swapped", private_pem().as_bytes()));
        let err = refusal(PassSettings {
            keys: vec![swapped],
            issuer_key: None,
        });
        assert!(err.contains("not a `PUBLIC KEY`"), "{err}");

        let mut bad_id = entry("a b");
        bad_id.hs256_secret_file = Some(file("id", &[b'x'; 40]));
        let err = refusal(PassSettings {
            keys: vec![bad_id],
            issuer_key: None,
        });
        assert!(err.contains("passes.keys[0].id"), "{err}");
    }

    #[test]
    fn the_issuer_must_be_a_key_that_can_sign() {
        let mut hs = entry("hs");
        hs.hs256_secret_file = Some(file("issuer", &[b'k'; 32]));
        let err = refusal(PassSettings {
            keys: vec![hs.clone()],
            issuer_key: Some("other".into()),
        });
        assert!(err.contains("passes.issuer_key"), "{err}");
        let mut twice = hs.clone();
        twice.id = "hs".into();
        let err = refusal(PassSettings {
            keys: vec![hs, twice],
            issuer_key: None,
        });
        assert!(err.contains("passes.keys[1].id"), "{err}");
    }
}
