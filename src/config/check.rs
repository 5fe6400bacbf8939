//! How every section's `validate` words a refusal: the dotted key at fault,
//! then why, so `stockd config check` points at the one line to fix.

use anyhow::{bail, Context};

/// One semantic check of a section: whether it holds, the key it is about,
/// and the reason shown when it does not.
pub(super) type Check<'a> = (bool, &'a str, &'a str);

/// Refuses with the first check that does not hold.
pub(super) fn all(checks: &[Check<'_>]) -> anyhow::Result<()> {
    for (ok, key, why) in checks {
        if !ok {
            bail!("invalid configuration key `{key}`: {why}");
        }
    }
    Ok(())
}

/// `value` must be a socket address (`host:port` with an IP host).
pub(super) fn socket_addr(key: &str, value: &str) -> anyhow::Result<()> {
    value
        .parse::<std::net::SocketAddr>()
        .with_context(|| format!("invalid configuration key `{key}`: {value}"))?;
    Ok(())
}

/// Whether a Redis key prefix or a queue prefix holds only `[A-Za-z0-9_.:-]`.
pub(super) fn valid_prefix(prefix: &str) -> bool {
    prefix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))
}
