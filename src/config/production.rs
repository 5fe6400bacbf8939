//! What `STOCKD_ENV=production` refuses at start-up and in `stockd config check`:
//! settings that are fine on a laptop and dangerous on the internet.
//!
//! - an admin token shorter than [`ADMIN_TOKEN_LEN_MIN`] characters, or one of
//!   the tokens this repository ships in its example configs (anyone can read
//!   them); no token at all is allowed — the admin routes then answer 401;
//! - `auth.required: false` (anyone reaching the public listener could confirm
//!   or cancel any reservation) and an empty `auth.clients` (nobody could call).
//!
//! (A dependency URL that does not parse is refused in every environment, by
//! its section's `validate`.)
//!
//! Each refusal names the key at fault and never prints the secret.

use anyhow::bail;

use super::Settings;

/// Shortest admin token production accepts: 32 characters (e.g. `openssl rand -hex 16`
/// gives 32 hex digits, 128 bits).
pub const ADMIN_TOKEN_LEN_MIN: usize = 32;

/// Tokens that appear in this repository's example configs (config/local.yaml,
/// config/test.yaml, tests): public knowledge, never a production secret.
/// `known_tokens_cover_the_example_configs` keeps the list complete.
pub const EXAMPLE_ADMIN_TOKENS: [&str; 2] = ["dev-admin-token", "test-admin-token"];

/// The production-only checks.
pub fn check(settings: &Settings) -> anyhow::Result<()> {
    if let Some(token) = &settings.admin.token {
        if token.chars().count() < ADMIN_TOKEN_LEN_MIN {
            bail!(
                "invalid configuration key `admin.token`: production needs at least \
                 {ADMIN_TOKEN_LEN_MIN} characters (generate one: openssl rand -hex 32)"
            );
        }
        if EXAMPLE_ADMIN_TOKENS.contains(&token.as_str()) {
            bail!(
                "invalid configuration key `admin.token`: it is an example token from this \
                 repository's configs; set a secret of your own"
            );
        }
    }
    check_auth(settings)
}

/// The public API is closed, and someone can open it.
fn check_auth(settings: &Settings) -> anyhow::Result<()> {
    if !settings.auth.required {
        bail!(
            "invalid configuration key `auth.required`: production needs true (every public \
             call names its client; docs/operations.md, \"Client tokens\")"
        );
    }
    if settings.auth.clients.is_empty() {
        bail!(
            "invalid configuration key `auth.clients`: production needs at least one client \
             (STOCKD__AUTH__CLIENTS; docs/operations.md, \"Client tokens\")"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_tokens_cover_the_example_configs() {
        let root = env!("CARGO_MANIFEST_DIR");
        for file in ["config/local.yaml", "config/test.yaml"] {
            let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
            let yaml: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
            if let Some(token) = yaml["admin"]["token"].as_str() {
                assert!(EXAMPLE_ADMIN_TOKENS.contains(&token), "{file}: {token}");
            }
        }
    }
}
