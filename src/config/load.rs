//! Loading: the layers `config/base.yaml` < `config/$STOCKD_ENV.yaml` <
//! `STOCKD__SECTION__KEY` environment variables are merged as YAML trees, then
//! deserialized once into [`Settings`] and validated section by section.
//!
//! The `…_file` variants of the secrets are resolved on the way
//! (`secret_files.rs`): each layer's `x` or `x_file` shadows the other from
//! the layers below, and the files are read after the merge.
//!
//! Merging trees before typing them is what lets `deny_unknown_fields` name a
//! typo in any layer by its dotted key instead of ignoring it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_yaml::{Mapping, Value};

use super::{production, secret_files, Settings};

/// Prefix of environment variables that override configuration keys.
const ENV_PREFIX: &str = "STOCKD__";

impl Settings {
    /// Loads the layers from `dir` for environment `env`, applying the process environment.
    pub fn load(dir: &Path, env: &str) -> anyhow::Result<Self> {
        let vars: Vec<(String, String)> = std::env::vars().collect();
        Self::load_with_vars(dir, env, &vars)
    }

    /// Same as [`Settings::load`] with explicit variables (tests pass their own).
    pub fn load_with_vars(
        dir: &Path,
        env: &str,
        vars: &[(String, String)],
    ) -> anyhow::Result<Self> {
        let mut tree = read_yaml(&dir.join("base.yaml"))?;
        let base = tree.clone();
        secret_files::shadow_lower_layers(&mut Value::Null, "config/base.yaml", |s, k| {
            secret_files::yaml_sets(&base, s, k)
        })?;
        let env_file = dir.join(format!("{env}.yaml"));
        if env_file.exists() {
            let layer = read_yaml(&env_file)?;
            let name = format!("config/{env}.yaml");
            secret_files::shadow_lower_layers(&mut tree, &name, |s, k| {
                secret_files::yaml_sets(&layer, s, k)
            })?;
            merge(&mut tree, layer);
        } else if env != "local" {
            bail!("STOCKD_ENV={env} but {} does not exist", env_file.display());
        }
        secret_files::shadow_lower_layers(&mut tree, "the environment", |s, k| {
            env_sets(vars, s, k)
        })?;
        for (name, raw) in vars {
            if let Some(path) = name.strip_prefix(ENV_PREFIX) {
                apply_env_override(&mut tree, path, raw)?;
            }
        }
        secret_files::read_secret_files(&mut tree)?;
        let settings: Settings = serde_path_to_error::deserialize(tree).map_err(|err| {
            anyhow::anyhow!(
                "invalid configuration key `{}`: {}",
                err.path(),
                err.inner()
            )
        })?;
        settings.validate()?;
        // Every environment but `local` and `test` (staging too): contract §17.
        if production::applies_to(env) {
            production::check(&settings, env)?;
        }
        Ok(settings)
    }
}

/// The configuration directory: `STOCKD_CONFIG_DIR` or `./config`.
pub fn config_dir() -> PathBuf {
    std::env::var_os("STOCKD_CONFIG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("config"))
}

/// The environment name: `STOCKD_ENV` or `local`.
pub fn env_name() -> String {
    std::env::var("STOCKD_ENV").unwrap_or_else(|_| "local".into())
}

/// Whether `vars` set `section.key` (`STOCKD__SECTION__KEY`, any case) to
/// something other than blank.
fn env_sets(vars: &[(String, String)], section: &str, key: &str) -> bool {
    let name = format!("{ENV_PREFIX}{section}__{key}");
    vars.iter()
        .any(|(var, raw)| var.eq_ignore_ascii_case(&name) && !raw.trim().is_empty())
}

fn read_yaml(path: &Path) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Deep-merges `over` into `base`: mappings merge key by key, anything else replaces.
fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(base_map), Value::Mapping(over_map)) => {
            for (key, value) in over_map {
                match base_map.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base_map.insert(key, value);
                    }
                }
            }
        }
        (slot, value) => *slot = value,
    }
}

/// Applies `STOCKD__HTTP__BIND=...` as `http.bind`; the value is parsed as YAML so
/// numbers and booleans keep their types.
fn apply_env_override(tree: &mut Value, path: &str, raw: &str) -> anyhow::Result<()> {
    let keys: Vec<String> = path.split("__").map(|k| k.to_ascii_lowercase()).collect();
    if keys.iter().any(String::is_empty) {
        bail!("invalid environment variable {ENV_PREFIX}{path}: empty key segment");
    }
    let mut node = tree;
    for key in &keys[..keys.len() - 1] {
        let map = node
            .as_mapping_mut()
            .with_context(|| format!("{ENV_PREFIX}{path}: `{key}` is not a section"))?;
        node = map
            .entry(Value::String(key.clone()))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
    }
    let map = node
        .as_mapping_mut()
        .with_context(|| format!("{ENV_PREFIX}{path}: parent is not a section"))?;
    let key = Value::String(keys[keys.len() - 1].clone());
    // A list-valued key takes a comma-separated string or a YAML flow list
    // (contract §9).
    let value = match map.get(&key) {
        Some(Value::Sequence(_)) => {
            list_value(raw).with_context(|| format!("{ENV_PREFIX}{path}: not a YAML flow list"))?
        }
        _ => scalar_value(raw),
    };
    map.insert(key, value);
    Ok(())
}

/// Numbers, booleans and null keep their YAML types; anything else (a prefix
/// like `stockd:` would parse as a YAML map) is taken verbatim as a string.
fn scalar_value(raw: &str) -> Value {
    match serde_yaml::from_str::<Value>(raw) {
        Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => v,
        _ => Value::String(raw.into()),
    }
}

/// `a, b,,c` as the list `[a, b, c]`, numbers and booleans typed; a value
/// starting with `[` is a YAML flow list (`[{name: a, scopes: [read]}]`), the
/// only way to give a list of mappings.
fn list_value(raw: &str) -> anyhow::Result<Value> {
    if raw.trim_start().starts_with('[') {
        let value: Value = serde_yaml::from_str(raw)?;
        anyhow::ensure!(value.is_sequence(), "not a list");
        return Ok(value);
    }
    Ok(Value::Sequence(
        raw.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| match serde_yaml::from_str::<Value>(item) {
                Ok(v @ (Value::Number(_) | Value::Bool(_))) => v,
                _ => Value::String(item.into()),
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use crate::config::{repo_config, Durability, Settings};

    #[test]
    fn base_and_local_layers_give_the_spec_defaults() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.http.bind, "127.0.0.1:8080");
        assert_eq!(s.admin.token.as_deref(), Some("dev-admin-token"));
        assert_eq!(s.mysql.url, "mysql://root@127.0.0.1:3306/stockd");
        assert_eq!(s.redis.url, "redis://127.0.0.1:6379");
        assert_eq!(s.redis.key_prefix, "stockd:");
        assert_eq!(s.amqp.url, "amqp://guest:guest@127.0.0.1:5672/%2f");
        assert_eq!(s.amqp.queue_prefix, "stockd.");
        assert_eq!(s.reservation.ttl_secs, 900);
        assert_eq!(s.reservation.durability, Durability::Queue);
    }

    #[test]
    fn production_has_no_admin_token_by_default() {
        // What production.yaml leaves to the environment: a client and the
        // stores' users (base.yaml's root and guest are refused).
        let vars = vec![
            (
                "STOCKD__AUTH__CLIENTS".to_string(),
                format!(
                    "[{{name: a, token_sha256: \"{}\", scopes: [read]}}]",
                    "0".repeat(64)
                ),
            ),
            (
                "STOCKD__MYSQL__URL".to_string(),
                "mysql://stockd_app:pw@db:3306/stockd".to_string(),
            ),
            (
                "STOCKD__AMQP__URL".to_string(),
                "amqp://stockd_app:pw@rabbitmq:5672/%2f".to_string(),
            ),
        ];
        let s = Settings::load_with_vars(&repo_config(), "production", &vars).unwrap();
        assert!(s.admin.token.is_none());
        assert!(s.auth.required);
        assert!(s.http.tls_terminated_by_proxy);
        assert!(s.limits.per_client_rps > 0.0 && s.limits.per_client_burst > 0);
    }

    #[test]
    fn production_refuses_an_open_api_or_no_client_naming_the_key() {
        let err = Settings::load_with_vars(&repo_config(), "production", &[]).unwrap_err();
        assert!(err.to_string().contains("`auth.clients`"), "{err}");
        let vars = vec![("STOCKD__AUTH__REQUIRED".to_string(), "false".to_string())];
        let err = Settings::load_with_vars(&repo_config(), "production", &vars).unwrap_err();
        assert!(err.to_string().contains("`auth.required`"), "{err}");
    }

    #[test]
    fn env_vars_override_files_with_types_kept() {
        let vars = vec![
            ("STOCKD__RESERVATION__TTL_SECS".to_string(), "3".to_string()),
            (
                "STOCKD__RESERVATION__DURABILITY".to_string(),
                "redis".to_string(),
            ),
            ("STOCKD__ADMIN__TOKEN".to_string(), "s3cret".to_string()),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert_eq!(s.reservation.ttl_secs, 3);
        assert_eq!(s.reservation.durability, Durability::Redis);
        assert_eq!(s.admin.token.as_deref(), Some("s3cret"));
    }

    #[test]
    fn env_strings_that_look_like_yaml_stay_strings() {
        let vars = vec![
            (
                "STOCKD__REDIS__KEY_PREFIX".to_string(),
                "shop1:".to_string(),
            ),
            ("STOCKD__AMQP__QUEUE_PREFIX".to_string(), "- x".to_string()),
        ];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("amqp.queue_prefix"), "{err}");
        let vars = vec![(
            "STOCKD__REDIS__KEY_PREFIX".to_string(),
            "shop1:".to_string(),
        )];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert_eq!(s.redis.key_prefix, "shop1:");
    }

    #[test]
    fn a_list_of_clients_comes_from_the_environment_as_yaml() {
        let hash = "ab".repeat(32);
        let clients = format!(
            "[{{name: orders, token_sha256: \"{hash}\", scopes: [reserve, read, lifecycle]}}]"
        );
        let vars = vec![
            ("STOCKD__AUTH__CLIENTS".to_string(), clients),
            (
                "STOCKD__HTTP__TRUSTED_PROXIES".to_string(),
                "[10.0.0.0/8, 192.168.0.0/16]".to_string(),
            ),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        assert_eq!(s.auth.clients.len(), 1);
        assert_eq!(s.auth.clients[0].name, "orders");
        assert_eq!(s.auth.clients[0].token_sha256.as_deref(), Some(&*hash));
        assert_eq!(s.auth.clients[0].scopes.len(), 3);
        assert_eq!(s.http.trusted_proxies.len(), 2);
        let vars = vec![(
            "STOCKD__AUTH__CLIENTS".to_string(),
            "[{name: orders, scopes: [pay]}]".to_string(),
        )];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("auth.clients"), "{err}");
    }

    #[test]
    fn an_unknown_key_is_named_in_the_error() {
        let vars = vec![("STOCKD__HTTP__BINDD".to_string(), "x".to_string())];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("bindd"), "{err}");
    }

    #[test]
    fn a_bad_value_is_named_in_the_error() {
        let vars = vec![(
            "STOCKD__RESERVATION__TTL_SECS".to_string(),
            "soon".to_string(),
        )];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("reservation.ttl_secs"), "{err}");
        let vars = vec![("STOCKD__RESERVATION__TTL_SECS".to_string(), "0".to_string())];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("reservation.ttl_secs"), "{err}");
    }

    #[test]
    fn the_lapse_cap_is_off_by_default_and_bounded() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.limits.max_lapsed_holds, 0);
        let var = |v: &str| {
            vec![(
                "STOCKD__LIMITS__MAX_LAPSED_HOLDS".to_string(),
                v.to_string(),
            )]
        };
        let s = Settings::load_with_vars(&repo_config(), "local", &var("3")).unwrap();
        assert_eq!(s.limits.max_lapsed_holds, 3);
        let err = Settings::load_with_vars(&repo_config(), "local", &var("1001")).unwrap_err();
        assert!(err.to_string().contains("limits.max_lapsed_holds"), "{err}");
    }

    #[test]
    fn the_hold_budget_is_off_by_default_and_bounded() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.limits.buyer_max_live_units, 0);
        let var = |v: &str| {
            vec![(
                "STOCKD__LIMITS__BUYER_MAX_LIVE_UNITS".to_string(),
                v.to_string(),
            )]
        };
        let s = Settings::load_with_vars(&repo_config(), "local", &var("5")).unwrap();
        assert_eq!(s.limits.buyer_max_live_units, 5);
        let err = Settings::load_with_vars(&repo_config(), "local", &var("1000001")).unwrap_err();
        assert!(
            err.to_string().contains("limits.buyer_max_live_units"),
            "{err}"
        );
    }
}
