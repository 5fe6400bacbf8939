//! The production check: what every environment but `local` and `test`
//! (`production`, `staging`, …; [`applies_to`]) refuses at start-up and in
//! `stockd config check` — settings that are fine on a laptop and dangerous on
//! the internet.
//!
//! - an admin token shorter than [`ADMIN_TOKEN_LEN_MIN`] characters, or one of
//!   the tokens this repository ships in its example configs (anyone can read
//!   them); no token at all is allowed — the admin routes then answer 401;
//! - `auth.required: false` (anyone reaching the public listener could confirm
//!   or cancel any reservation) and an empty `auth.clients` (nobody could call);
//! - plain HTTP on a non-loopback `http.bind` or `admin.bind` (client and admin
//!   tokens would cross the network in the clear), unless `http.tls` is on or
//!   `http.tls_terminated_by_proxy` says a proxy in front terminates TLS;
//! - `limits.per_ip_rps` on with an empty `http.trusted_proxies`: behind a
//!   proxy every buyer has the proxy's address, and one IP's limit would cap
//!   the whole sale;
//! - the test-only keys of the sale window: `sale.clock_offset_ms` other than
//!   0 (a node whose clock is moved on purpose);
//! - the stores' built-in accounts: RabbitMQ's `guest`/`guest` in a broker URL
//!   stockd connects with (`amqp.urls`, or `amqp.url` when that is empty; a URL
//!   without credentials means guest too), MySQL's `root` in `mysql.url`.
//!
//! (A dependency URL that does not parse is refused in every environment, by
//! [`Settings::check_urls`](super::Settings::check_urls).) The last check reads
//! each URL's user as its driver would log in, so it runs with the URL checks,
//! after this module's others: [`check_accounts`].
//!
//! Each refusal names the key at fault and never prints the secret.

use std::net::SocketAddr;

use anyhow::bail;

use super::{DriverUrls, HttpSettings, Settings};

/// Shortest admin token production accepts: 32 characters (e.g. `openssl rand -hex 16`
/// gives 32 hex digits, 128 bits).
pub const ADMIN_TOKEN_LEN_MIN: usize = 32;

/// Tokens that appear in this repository's example configs (config/local.yaml,
/// config/test.yaml, tests): public knowledge, never a production secret.
/// `known_tokens_cover_the_example_configs` keeps the list complete.
pub const EXAMPLE_ADMIN_TOKENS: [&str; 2] = ["dev-admin-token", "test-admin-token"];

/// Whether the environment `env` (`STOCKD_ENV`) is held to [`check`]: every
/// one but `local` and `test`, the two this repository runs on a laptop and in CI.
pub fn applies_to(env: &str) -> bool {
    !matches!(env, "local" | "test")
}

/// The production checks config judges alone, in order: admin token, auth,
/// listeners, limits. The first refusal is reported, naming the environment
/// `env` it ran for (`staging` is held to it as `production` is).
pub fn check(settings: &Settings, env: &str) -> anyhow::Result<()> {
    let checks = || -> anyhow::Result<()> {
        check_admin_token(settings)?;
        check_auth(settings)?;
        check_listeners(&settings.http, settings.admin.bind.as_deref())?;
        check_limits(settings)?;
        check_sale(settings)
    };
    checks().map_err(|err| held_to_it(err, env))
}

/// The last production check, the stores' built-in accounts, with each
/// URL's user read by its driver (`drivers`); worded as [`check`]'s refusals.
pub fn check_accounts(settings: &Settings, env: &str, drivers: &DriverUrls) -> anyhow::Result<()> {
    check_credentials(settings, drivers).map_err(|err| held_to_it(err, env))
}

/// A refusal of this check, naming the environment it ran for.
fn held_to_it(err: anyhow::Error, env: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{err} (STOCKD_ENV={env} is held to the production check: every environment but \
         local and test; docs/contract.md §17)"
    )
}

/// A long, unpublished admin token (or none).
fn check_admin_token(settings: &Settings) -> anyhow::Result<()> {
    if let Some(token) = &settings.admin.token {
        if token.chars().count() < ADMIN_TOKEN_LEN_MIN {
            bail!(
                "invalid configuration key `admin.token`: this environment needs at least \
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
    Ok(())
}

/// The public API is closed, and someone can open it.
fn check_auth(settings: &Settings) -> anyhow::Result<()> {
    if !settings.auth.required {
        bail!(
            "invalid configuration key `auth.required`: this environment needs true (every public \
             call names its client; docs/operations.md, \"Client tokens\")"
        );
    }
    if settings.auth.clients.is_empty() {
        bail!(
            "invalid configuration key `auth.clients`: this environment needs at least one client \
             (STOCKD__AUTH__CLIENTS; docs/operations.md, \"Client tokens\")"
        );
    }
    Ok(())
}

/// No plain HTTP on an address other machines reach, unless a proxy in front
/// terminates TLS. `http.tls` covers both listeners.
fn check_listeners(http: &HttpSettings, admin_bind: Option<&str>) -> anyhow::Result<()> {
    if http.tls.is_on() || http.tls_terminated_by_proxy {
        return Ok(());
    }
    let binds = [
        ("http.bind", Some(http.bind.as_str())),
        ("admin.bind", admin_bind),
    ];
    for (key, bind) in binds {
        let Some(bind) = bind else { continue };
        let loopback = bind
            .parse::<SocketAddr>()
            .is_ok_and(|addr| addr.ip().is_loopback());
        if !loopback {
            bail!(
                "invalid configuration key `{key}`: this environment refuses plain HTTP on a \
                 non-loopback address ({bind}: tokens would cross the network in the clear); \
                 turn on http.tls (cert_file, key_file), or set \
                 http.tls_terminated_by_proxy: true when a proxy in front terminates TLS"
            );
        }
    }
    Ok(())
}

/// A per-IP limit needs to know the buyers' addresses.
fn check_limits(settings: &Settings) -> anyhow::Result<()> {
    if settings.limits.per_ip_rps > 0.0 && settings.http.trusted_proxies.is_empty() {
        bail!(
            "invalid configuration key `limits.per_ip_rps`: this environment refuses a per-IP limit \
             with an empty http.trusted_proxies (behind a proxy or ingress every buyer has the \
             proxy's address, and one IP's limit would cap the whole sale); set \
             http.trusted_proxies to the proxies' CIDRs, or set limits.per_ip_rps: 0 and \
             limit each client with limits.per_client_rps and per_client_burst"
        );
    }
    Ok(())
}

/// No key of `sale` that exists for tests only.
fn check_sale(settings: &Settings) -> anyhow::Result<()> {
    if settings.sale.clock_offset_ms != 0 {
        bail!(
            "invalid configuration key `sale.clock_offset_ms`: this environment refuses a              moved sale clock (for tests only); set it to 0"
        );
    }
    Ok(())
}

/// Not the stores' built-in accounts: RabbitMQ's `guest` (which the broker
/// lets in only from loopback, and everyone knows the password of) and
/// MySQL's `root` (all privileges; the runtime needs SELECT, INSERT, UPDATE).
fn check_credentials(settings: &Settings, drivers: &DriverUrls) -> anyhow::Result<()> {
    let amqp = &settings.amqp;
    let brokers: Vec<(&str, &str)> = if amqp.urls.is_empty() {
        vec![("amqp.url", amqp.url.as_str())]
    } else {
        amqp.urls
            .iter()
            .map(|u| ("amqp.urls", u.as_str()))
            .collect()
    };
    for (key, url) in brokers {
        // Unparsable URLs are refused by `Settings::check_urls`, before this.
        let Ok((username, password)) = (drivers.amqp_login)(url) else {
            continue;
        };
        if username == "guest" && password == "guest" {
            bail!(
                "invalid configuration key `{key}`: this environment refuses RabbitMQ's built-in \
                 guest/guest account (a URL without a user means it too); give stockd a user \
                 of its own (docs/operations.md, \"Users and grants\")"
            );
        }
    }
    if (drivers.mysql_user)(&settings.mysql.url).as_deref() == Some("root") {
        bail!(
            "invalid configuration key `mysql.url`: this environment refuses the user root \
             (the runtime needs only SELECT, INSERT, UPDATE); give stockd a user of its \
             own (docs/operations.md, \"Users and grants\")"
        );
    }
    Ok(())
}

/// Test support, shared with `config_check`'s tests.
#[cfg(test)]
/// What the environment adds to `config/production.yaml` in a deployment
/// that passes: a client and the stores' own users.
pub(crate) fn deployed(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let client = format!(
        "[{{name: orders, token_sha256: \"{}\", scopes: [reserve]}}]",
        "0".repeat(64)
    );
    let mut vars = vec![
        ("STOCKD__AUTH__CLIENTS".to_string(), client),
        (
            "STOCKD__MYSQL__URL".to_string(),
            "mysql://stockd_app:db-pw-61@db:3306/stockd".to_string(),
        ),
        (
            "STOCKD__AMQP__URL".to_string(),
            "amqp://stockd_app:mq-pw-62@rabbitmq:5672/%2f".to_string(),
        ),
    ];
    for (k, v) in extra {
        vars.retain(|(name, _)| name != k);
        vars.push((k.to_string(), v.to_string()));
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::repo_config;

    fn load(env: &str, extra: &[(&str, &str)]) -> anyhow::Result<Settings> {
        Settings::load_with_vars(&repo_config(), env, &deployed(extra))
    }

    /// The refusal of `extra` over a passing deployment, as `config check` shows it.
    fn refusal(extra: &[(&str, &str)]) -> String {
        let err = load("production", extra).unwrap_err();
        format!("{err:#}")
    }

    #[test]
    fn the_shipped_production_config_passes_its_own_check() {
        let s = load("production", &[]).unwrap();
        assert!(s.http.tls_terminated_by_proxy);
        assert_eq!(s.limits.per_ip_rps, 0.0);
        assert!(s.limits.per_client_rps > 0.0 && s.limits.per_client_burst >= 1);
    }

    #[test]
    fn plain_http_on_a_public_bind_is_refused_naming_the_listener() {
        let no_proxy = ("STOCKD__HTTP__TLS_TERMINATED_BY_PROXY", "false");
        let err = refusal(&[no_proxy]);
        assert!(
            err.contains("`http.bind`") && err.contains("tls_terminated_by_proxy"),
            "{err}"
        );
        // Loopback needs no TLS; production.yaml keeps admin.bind there.
        let loopback = ("STOCKD__HTTP__BIND", "127.0.0.1:8080");
        load("production", &[no_proxy, loopback]).unwrap();
        let admin = ("STOCKD__ADMIN__BIND", "0.0.0.0:8081");
        let err = refusal(&[no_proxy, loopback, admin]);
        assert!(err.contains("`admin.bind`"), "{err}");
        let ipv6 = ("STOCKD__HTTP__BIND", "[::]:8080");
        let err = refusal(&[no_proxy, ipv6]);
        assert!(err.contains("`http.bind`"), "{err}");
        // The proxy terminating TLS, or TLS on the listeners, fixes it.
        load("production", &[admin]).unwrap();
        let mut s = load("production", &[]).unwrap();
        s.http.tls_terminated_by_proxy = false;
        s.admin.bind = Some("10.0.0.5:8081".into());
        assert!(check(&s, "production").is_err());
        s.http.tls.cert_file = Some("server.pem".into());
        s.http.tls.key_file = Some("server.key".into());
        check(&s, "production").unwrap();
    }

    #[test]
    fn a_per_ip_limit_without_trusted_proxies_is_refused() {
        let per_ip = [
            ("STOCKD__LIMITS__PER_IP_RPS", "50"),
            ("STOCKD__LIMITS__PER_IP_BURST", "100"),
        ];
        let err = refusal(&per_ip);
        assert!(
            err.contains("`limits.per_ip_rps`")
                && err.contains("http.trusted_proxies")
                && err.contains("per_client"),
            "{err}"
        );
        let proxies = ("STOCKD__HTTP__TRUSTED_PROXIES", "10.0.0.0/8");
        load("production", &[per_ip[0], per_ip[1], proxies]).unwrap();
    }

    #[test]
    fn the_sale_windows_test_keys_are_refused() {
        let err = refusal(&[("STOCKD__SALE__CLOCK_OFFSET_MS", "5000")]);
        assert!(err.contains("`sale.clock_offset_ms`"), "{err}");
    }

    #[test]
    fn every_environment_but_local_and_test_is_checked() {
        assert!(!applies_to("local") && !applies_to("test"));
        for env in ["production", "staging", "prod", "decoys"] {
            assert!(applies_to(env), "{env}");
        }
        // A `staging` file that opens the API, as local.yaml does, is refused.
        let dir = std::env::temp_dir().join(format!("stockd-staging-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(repo_config().join("base.yaml"), dir.join("base.yaml")).unwrap();
        let local = std::fs::read_to_string(repo_config().join("local.yaml")).unwrap();
        std::fs::write(dir.join("staging.yaml"), &local).unwrap();
        let err = Settings::load_with_vars(&dir, "staging", &deployed(&[])).unwrap_err();
        let err = format!("{err:#}");
        assert!(err.contains("`admin.token`"), "{err}");
        // It names the environment it ran for, not "production".
        assert!(
            err.contains("STOCKD_ENV=staging") && !err.contains("production needs"),
            "{err}"
        );
        let production = std::fs::read_to_string(repo_config().join("production.yaml")).unwrap();
        std::fs::write(dir.join("staging.yaml"), production).unwrap();
        let passed = Settings::load_with_vars(&dir, "staging", &deployed(&[]));
        std::fs::remove_dir_all(&dir).unwrap();
        passed.unwrap();
        // local and test keep base.yaml's root and guest, open APIs and example tokens.
        for env in ["local", "test"] {
            Settings::load_with_vars(&repo_config(), env, &[]).unwrap();
        }
    }

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
