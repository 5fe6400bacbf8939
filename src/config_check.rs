//! The configuration as the drivers judge it: [`load`] is
//! [`Settings::load`] followed by [`Settings::check_urls`] with the adapters'
//! URL parsers ([`DRIVER_URLS`]), so a dependency URL its driver would refuse,
//! or a store's built-in account in production, is refused at start-up and
//! by `stockd config check`, naming its key.
//!
//! Why a module of its own: config sits below the adapters and may not import
//! them, and each driver is named only in its adapter
//! (`tests/it/driver_fence.rs`); config keeps the rules and their wording
//! (`config/driver_urls.rs`), the adapters the parsing (`db/url.rs`,
//! `redis/url.rs`, `mq/url.rs`), and this file, above both, joins them.

use std::path::Path;

use crate::config::{DriverUrls, Settings};

/// The adapters' URL parsers, as config asks them.
pub const DRIVER_URLS: DriverUrls = DriverUrls {
    mysql_refusal: crate::db::url::refusal,
    mysql_user: crate::db::url::user,
    redis_refusal: crate::redis::url::refusal,
    amqp_login,
};

fn amqp_login(url: &str) -> Result<(String, String), String> {
    crate::mq::url::login(url).map(|login| (login.username, login.password))
}

/// [`Settings::load`], then the URLs and accounts only the drivers can judge.
pub fn load(dir: &Path, env: &str) -> anyhow::Result<Settings> {
    let settings = Settings::load(dir, env)?;
    settings.check_urls(env, &DRIVER_URLS)?;
    Ok(settings)
}

/// [`load`] with explicit variables (tests pass their own).
pub fn load_with_vars(
    dir: &Path,
    env: &str,
    vars: &[(String, String)],
) -> anyhow::Result<Settings> {
    let settings = Settings::load_with_vars(dir, env, vars)?;
    settings.check_urls(env, &DRIVER_URLS)?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn repo_config() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config")
    }

    fn load(env: &str, extra: &[(&str, &str)]) -> anyhow::Result<Settings> {
        load_with_vars(
            &repo_config(),
            env,
            &crate::config::deployed_for_tests(extra),
        )
    }

    /// The refusal of `extra` over a passing deployment, as `config check` shows it.
    fn refusal(extra: &[(&str, &str)]) -> String {
        let err = load("production", extra).unwrap_err();
        format!("{err:#}")
    }

    #[test]
    fn the_shipped_configs_pass() {
        load("production", &[]).unwrap();
        for env in ["local", "test"] {
            load_with_vars(&repo_config(), env, &[]).unwrap();
        }
    }

    #[test]
    fn the_stores_built_in_accounts_are_refused_without_printing_the_url() {
        for guest in [
            "amqp://guest:guest@rabbitmq:5672/%2f",
            "amqp://rabbitmq:5672/%2f",
        ] {
            let err = refusal(&[("STOCKD__AMQP__URL", guest)]);
            assert!(
                err.contains("`amqp.url`") && !err.contains("rabbitmq"),
                "{err}"
            );
        }
        let urls = "amqp://stockd_app:mq-pw-62@h1/%2f, amqp://guest:guest@h2/%2f";
        let err = refusal(&[("STOCKD__AMQP__URLS", urls)]);
        assert!(
            err.contains("`amqp.urls`") && !err.contains("mq-pw-62"),
            "{err}"
        );
        // amqp.urls replaces amqp.url: base.yaml's guest URL, unused, is no refusal.
        let urls = "amqp://stockd_app:mq-pw-62@h1/%2f, amqp://stockd_app:mq-pw-62@h2/%2f";
        let guest_url = ("STOCKD__AMQP__URL", "amqp://guest:guest@127.0.0.1:5672/%2f");
        load("production", &[guest_url, ("STOCKD__AMQP__URLS", urls)]).unwrap();
        let err = refusal(&[("STOCKD__MYSQL__URL", "mysql://root:db-pw-61@db:3306/stockd")]);
        assert!(
            err.contains("`mysql.url`") && !err.contains("db-pw-61"),
            "{err}"
        );
        // base.yaml's own URL (root, no password) without the environment's.
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        let err = s.check_urls("production", &DRIVER_URLS).unwrap_err();
        assert!(err.to_string().contains("`amqp.url`"), "{err}");
    }

    #[test]
    fn a_malformed_url_is_refused_without_its_password() {
        for (var, key) in [
            ("STOCKD__AMQP__URL", "`amqp.url`"),
            ("STOCKD__AMQP__URLS", "`amqp.urls`"),
        ] {
            for bad in [
                "amqp:stockd:pw-8c1f@rabbit:5672",
                "http://stockd:pw-8c1f@rabbit:5672/%2f",
                "amqp://stockd:pw-8c1f@rabbit:notaport/%2f",
            ] {
                let vars = vec![(var.to_string(), bad.to_string())];
                let err = load_with_vars(&repo_config(), "local", &vars).unwrap_err();
                let text = format!("{err:#}");
                assert!(text.contains(key), "{text}");
                assert!(!text.contains("pw-8c1f"), "{text}");
            }
        }
    }

    #[test]
    fn every_store_url_is_judged_by_its_driver() {
        for (var, bad, key) in [
            (
                "STOCKD__MYSQL__URL",
                "postgres://a@db/stockd",
                "`mysql.url`",
            ),
            ("STOCKD__REDIS__URL", "http://127.0.0.1:6379", "`redis.url`"),
        ] {
            let vars = vec![(var.to_string(), bad.to_string())];
            let err = load_with_vars(&repo_config(), "local", &vars).unwrap_err();
            assert!(err.to_string().contains(key), "{err}");
        }
        let vars = vec![
            ("STOCKD__REDIS__MODE".to_string(), "cluster".to_string()),
            (
                "STOCKD__REDIS__URLS".to_string(),
                "http://127.0.0.1:7000".to_string(),
            ),
        ];
        let err = load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("`redis.urls`"), "{err}");
    }
}
