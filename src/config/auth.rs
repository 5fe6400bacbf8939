//! Who may call the public API (`auth`): the clients stockd knows, each named by
//! the SHA-256 of its bearer token (the config never holds a token) or by the
//! subject of its verified TLS client certificate, and the scopes each may use.
//! `auth.required` decides whether an anonymous caller is refused.

use std::collections::HashSet;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::domain::CLIENT_NAME_MAX_LEN;

/// Hex digits of a SHA-256 digest.
pub const TOKEN_SHA256_HEX_LEN: usize = 64;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSettings {
    /// When true, every public route but the probes and `/openapi.json` needs a
    /// known client (401 without one, 403 without the route's scope).
    pub required: bool,
    /// The known clients. Env: a YAML flow list (`[{name: …, …}]`).
    pub clients: Vec<ClientSettings>,
}

/// One client of the public API.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSettings {
    /// Shown in the audit log and the `client` metric label; unique.
    pub name: String,
    /// SHA-256 (hex) of the bearer token (`printf %s "$token" | sha256sum`).
    #[serde(default)]
    pub token_sha256: Option<String>,
    /// Subject of the TLS client certificate that names this client (mutual
    /// TLS), instead of a token.
    #[serde(default)]
    pub cert_subject: Option<String>,
    /// What the client may do; at least one.
    pub scopes: Vec<Scope>,
}

/// What a client may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// `POST /v1/skus/{sku_id}/reservations`.
    Reserve,
    /// `GET` of reservations and SKUs.
    Read,
    /// Confirm and cancel a reservation.
    Lifecycle,
    /// The admin routes (`/v1/admin/*`), besides `admin.token`.
    Admin,
    /// `POST /v1/passes`: sign admission passes (a waiting room's scope).
    Passes,
}

impl Scope {
    /// The name used in the config, the OpenAPI document and problem details.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserve => "reserve",
            Self::Read => "read",
            Self::Lifecycle => "lifecycle",
            Self::Admin => "admin",
            Self::Passes => "passes",
        }
    }
}

impl AuthSettings {
    /// Names unique and non-empty, each client named by exactly one of a
    /// 64-hex-digit token hash or a certificate subject, at least one scope.
    /// (Unknown scopes are refused by serde, naming the key.)
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut names = HashSet::new();
        for (i, client) in self.clients.iter().enumerate() {
            let key = format!("auth.clients[{i}]");
            if client.name.trim().is_empty() {
                bail!("invalid configuration key `{key}.name`: must not be empty");
            }
            if client.name.len() > CLIENT_NAME_MAX_LEN {
                // Holds record the name (contract §6.2; MySQL `VARCHAR(64)`).
                bail!(
                    "invalid configuration key `{key}.name`: at most {CLIENT_NAME_MAX_LEN} bytes"
                );
            }
            if !names.insert(client.name.as_str()) {
                bail!(
                    "invalid configuration key `{key}.name`: `{}` is already the name of \
                     another client",
                    client.name
                );
            }
            client.validate_identity(&key)?;
            if client.scopes.is_empty() {
                bail!("invalid configuration key `{key}.scopes`: needs at least one scope");
            }
        }
        Ok(())
    }
}

impl ClientSettings {
    fn validate_identity(&self, key: &str) -> anyhow::Result<()> {
        match (&self.token_sha256, &self.cert_subject) {
            (Some(hash), None) => {
                if hash.len() != TOKEN_SHA256_HEX_LEN
                    || !hash.bytes().all(|b| b.is_ascii_hexdigit())
                {
                    bail!(
                        "invalid configuration key `{key}.token_sha256`: must be the \
                         {TOKEN_SHA256_HEX_LEN} hex digits of a SHA-256 (printf %s \"$token\" | \
                         sha256sum), never the token"
                    );
                }
                Ok(())
            }
            (None, Some(subject)) if !subject.trim().is_empty() => Ok(()),
            (None, Some(_)) => {
                bail!("invalid configuration key `{key}.cert_subject`: must not be empty")
            }
            _ => bail!(
                "invalid configuration key `{key}.token_sha256`: a client needs exactly one of \
                 token_sha256 and cert_subject"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

    fn client(name: &str) -> ClientSettings {
        ClientSettings {
            name: name.into(),
            token_sha256: Some(HASH.into()),
            cert_subject: None,
            scopes: vec![Scope::Read],
        }
    }

    fn refusal(clients: Vec<ClientSettings>) -> String {
        let auth = AuthSettings {
            required: true,
            clients,
        };
        auth.validate().unwrap_err().to_string()
    }

    #[test]
    fn a_well_formed_list_passes() {
        let mut by_cert = client("edge");
        by_cert.token_sha256 = None;
        by_cert.cert_subject = Some("CN=edge".into());
        let auth = AuthSettings {
            required: true,
            clients: vec![client("orders"), by_cert],
        };
        auth.validate().unwrap();
    }

    #[test]
    fn each_bad_entry_is_refused_naming_its_key() {
        let err = refusal(vec![client("a"), client("a")]);
        assert!(err.contains("auth.clients[1].name"), "{err}");
        let err = refusal(vec![client(" ")]);
        assert!(err.contains("auth.clients[0].name"), "{err}");
        let mut short = client("a");
        short.token_sha256 = Some("abc".into());
        let err = refusal(vec![short]);
        assert!(err.contains("auth.clients[0].token_sha256"), "{err}");
        let mut not_hex = client("a");
        not_hex.token_sha256 = Some("z".repeat(64));
        assert!(refusal(vec![not_hex]).contains("token_sha256"));
        let mut both = client("a");
        both.cert_subject = Some("CN=a".into());
        assert!(refusal(vec![both]).contains("exactly one"));
        let mut neither = client("a");
        neither.token_sha256 = None;
        assert!(refusal(vec![neither]).contains("exactly one"));
        let mut no_scope = client("a");
        no_scope.scopes.clear();
        let err = refusal(vec![no_scope]);
        assert!(err.contains("auth.clients[0].scopes"), "{err}");
    }
}
