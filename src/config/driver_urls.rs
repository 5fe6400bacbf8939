//! The checks of the dependency URLs, which only the drivers can judge.
//!
//! Config sits below the adapters (docs/architecture.md, "Modules and the
//! direction of dependencies") and each driver is named only inside its
//! adapter (`tests/it/driver_fence.rs`), so config cannot call a driver's
//! URL parser. It keeps the rule and the wording of every refusal here and
//! asks the parsers through [`DriverUrls`], which `config_check.rs` fills
//! from `db/url.rs`, `redis/url.rs` and `mq/url.rs` and runs right after
//! [`Settings::load`]. So `Settings::validate` judges all but the URLs, and a
//! configuration with two faults, one of them a URL, reports the other first.

use anyhow::bail;

use super::redact::redact_malformed_url;
use super::{production, Settings};

/// The drivers' URL parsers, as config asks them.
pub struct DriverUrls {
    /// Why MySQL's driver refuses a URL, in its words (`None`: it takes it).
    pub mysql_refusal: fn(&str) -> Option<String>,
    /// The user a MySQL URL logs in as (`None`: none, or a refused URL).
    pub mysql_user: fn(&str) -> Option<String>,
    /// Why the Redis client refuses a URL, in its words (`None`: it takes it).
    pub redis_refusal: fn(&str) -> Option<String>,
    /// The user and password a broker URL logs in with (a URL without them
    /// means `guest`/`guest`), or why the client refuses it; its words may
    /// quote the URL whole.
    pub amqp_login: fn(&str) -> Result<(String, String), String>,
}

impl Settings {
    /// Every dependency URL taken by its driver (`mysql.url`, then
    /// `redis.url` and `redis.urls`, then `amqp.url` and `amqp.urls`), and,
    /// in an environment held to the production check, not one of the
    /// stores' built-in accounts. The first refusal is reported, by its key.
    pub fn check_urls(&self, env: &str, drivers: &DriverUrls) -> anyhow::Result<()> {
        if let Some(err) = (drivers.mysql_refusal)(&self.mysql.url) {
            bail!("invalid configuration key `mysql.url`: {err}");
        }
        if let Some(err) = (drivers.redis_refusal)(&self.redis.url) {
            bail!("invalid configuration key `redis.url`: {err}");
        }
        for url in &self.redis.urls {
            if let Some(err) = (drivers.redis_refusal)(url) {
                bail!("invalid configuration key `redis.urls`: {err}");
            }
        }
        check_amqp_url(drivers, "amqp.url", &self.amqp.url)?;
        for url in &self.amqp.urls {
            check_amqp_url(drivers, "amqp.urls", url)?;
        }
        if production::applies_to(env) {
            production::check_accounts(self, env, drivers)?;
        }
        Ok(())
    }
}

/// Refuses a URL the client cannot parse, naming `key` and showing the URL
/// with its password redacted: the parser's own message may quote the whole URL.
fn check_amqp_url(drivers: &DriverUrls, key: &str, url: &str) -> anyhow::Result<()> {
    if let Err(err) = (drivers.amqp_login)(url) {
        let shown = redact_malformed_url(url);
        let why = err.replace(url, &shown);
        bail!("invalid configuration key `{key}`: not an AMQP URL ({shown}): {why}");
    }
    Ok(())
}
