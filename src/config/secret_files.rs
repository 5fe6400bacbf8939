//! Secrets from files: every secret key also takes a `…_file` variant holding
//! the path of a file with its value — the way container and Kubernetes
//! secrets are mounted, so no secret has to sit in the environment or a
//! committed file. The whole value comes from the file (for a URL: the whole
//! URL, password included), with one trailing newline trimmed; a list key
//! (`redis.urls_file`, `amqp.urls_file`) takes one URL per line.
//!
//! Layering stays as for every key: a layer that sets `x_file` replaces the
//! `x` of the layers below it (base.yaml's local `mysql.url`, say), and one
//! that sets `x` replaces their `x_file`. One layer setting both is refused,
//! naming the two keys. The files are read once, after the merge, and the
//! `…_file` keys are gone before the tree is typed: the rest of stockd sees
//! only `x`, which `redact.rs` keeps out of `config print` and `{:?}`.

use anyhow::{bail, Context};
use serde_yaml::{Mapping, Value};

/// `(section, key)` of every secret that takes a `…_file` variant.
const SECRET_KEYS: [(&str, &str); 6] = [
    ("admin", "token"),
    ("mysql", "url"),
    ("redis", "url"),
    ("redis", "urls"),
    ("amqp", "url"),
    ("amqp", "urls"),
];

/// What a file variant is called: `token` → `token_file`.
fn file_key(key: &str) -> String {
    format!("{key}_file")
}

/// One layer about to be merged over `tree`: refuses a secret set twice in it
/// (`layer` names the layer in the refusal), and drops from `tree` the partner
/// of every secret key the layer sets. `sets(section, key)` says whether the
/// layer sets that key.
pub(super) fn shadow_lower_layers(
    tree: &mut Value,
    layer: &str,
    sets: impl Fn(&str, &str) -> bool,
) -> anyhow::Result<()> {
    for (section, key) in SECRET_KEYS {
        let file = file_key(key);
        let (value_set, file_set) = (sets(section, key), sets(section, &file));
        if value_set && file_set {
            bail!(
                "invalid configuration keys `{section}.{key}` and `{section}.{file}`: \
                 both set in {layer}; set one"
            );
        }
        let partner = match (value_set, file_set) {
            (true, _) => file,
            (_, true) => key.to_string(),
            _ => continue,
        };
        if let Some(map) = tree.get_mut(section).and_then(Value::as_mapping_mut) {
            map.remove(partner.as_str());
        }
    }
    Ok(())
}

/// Whether the YAML layer `layer` sets `section.key`: present, not null and,
/// for a list, not empty.
pub(super) fn yaml_sets(layer: &Value, section: &str, key: &str) -> bool {
    match layer.get(section).and_then(|s| s.get(key)) {
        None | Some(Value::Null) => false,
        Some(Value::Sequence(items)) => !items.is_empty(),
        Some(_) => true,
    }
}

/// After the merge: every `…_file` key that is set is replaced by its file's
/// content; null ones are dropped. Errors name the key and the path, never
/// the content.
pub(super) fn read_secret_files(tree: &mut Value) -> anyhow::Result<()> {
    for (section, key) in SECRET_KEYS {
        let file = file_key(key);
        let Some(map) = tree.get_mut(section).and_then(Value::as_mapping_mut) else {
            continue;
        };
        let path = match map.remove(file.as_str()) {
            None | Some(Value::Null) => continue,
            Some(Value::String(path)) => path,
            Some(_) => bail!("invalid configuration key `{section}.{file}`: must be a path"),
        };
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!("invalid configuration key `{section}.{file}`: cannot read {path}")
        })?;
        let value = if key.ends_with('s') {
            url_list(&text)
        } else {
            Value::String(trim_one_newline(&text).to_string())
        };
        insert(map, key, value);
    }
    Ok(())
}

fn insert(map: &mut Mapping, key: &str, value: Value) {
    map.insert(Value::String(key.to_string()), value);
}

/// The file's value without the newline editors and `echo` leave at its end.
fn trim_one_newline(text: &str) -> &str {
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.strip_suffix('\r').unwrap_or(text)
}

/// One URL per non-empty line.
fn url_list(text: &str) -> Value {
    Value::Sequence(
        text.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(|line| Value::String(line.to_string()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{repo_config, Settings};

    /// A secret file under the system temp dir, unique to `name`.
    fn secret_file(name: &str, content: &str) -> String {
        let path =
            std::env::temp_dir().join(format!("stockd-secret-{}-{name}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        path.display().to_string()
    }

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_file_replaces_the_value_of_a_lower_layer_trimmed_of_its_newline() {
        let token = secret_file("token", "from-a-file\n");
        let urls = secret_file("urls", "redis://127.0.0.1:7001\n\nredis://127.0.0.1:7002\n");
        let s = Settings::load_with_vars(
            &repo_config(),
            "local",
            &vars(&[
                ("STOCKD__ADMIN__TOKEN_FILE", &token),
                ("STOCKD__REDIS__MODE", "cluster"),
                ("STOCKD__REDIS__URLS_FILE", &urls),
            ]),
        )
        .unwrap();
        assert_eq!(s.admin.token.as_deref(), Some("from-a-file"));
        assert_eq!(
            s.redis.urls,
            ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002"]
        );
    }

    #[test]
    fn a_secret_and_its_file_in_one_layer_are_refused_naming_both() {
        let url = secret_file("amqp", "amqp://guest:guest@127.0.0.1:5672/%2f");
        let err = Settings::load_with_vars(
            &repo_config(),
            "local",
            &vars(&[
                ("STOCKD__AMQP__URL", "amqp://127.0.0.1:5672/%2f"),
                ("STOCKD__AMQP__URL_FILE", &url),
            ]),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("`amqp.url`") && text.contains("`amqp.url_file`"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_file_is_named_by_its_key_and_path() {
        let err = Settings::load_with_vars(
            &repo_config(),
            "local",
            &vars(&[("STOCKD__MYSQL__URL_FILE", "/nonexistent/mysql-url")]),
        )
        .unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("mysql.url_file") && text.contains("/nonexistent/mysql-url"),
            "{text}"
        );
    }

    #[test]
    fn a_file_read_secret_is_never_printed() {
        let url = secret_file("mysql", "mysql://app:file-pw-77@127.0.0.1:3306/stockd\n");
        let s = Settings::load_with_vars(
            &repo_config(),
            "local",
            &vars(&[("STOCKD__MYSQL__URL_FILE", &url)]),
        )
        .unwrap();
        assert_eq!(s.mysql.url, "mysql://app:file-pw-77@127.0.0.1:3306/stockd");
        let printed = s.redacted_yaml().unwrap();
        assert!(!printed.contains("file-pw-77"), "{printed}");
        assert!(!format!("{s:?}").contains("file-pw-77"));
    }

    #[test]
    fn only_set_keys_count_as_set() {
        let layer: Value =
            serde_yaml::from_str("redis: {url: null, urls: []}\nadmin: {token: x}").unwrap();
        assert!(!yaml_sets(&layer, "redis", "url"));
        assert!(!yaml_sets(&layer, "redis", "urls"));
        assert!(yaml_sets(&layer, "admin", "token"));
        assert!(!yaml_sets(&layer, "amqp", "url"));
    }
}
