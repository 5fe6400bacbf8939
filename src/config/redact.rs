//! Secrets never printed: the admin token and the passwords in dependency URLs
//! are replaced by `<redacted>` in `stockd config print` and in every `{:?}`
//! of the sections that hold them (a settings struct logged by mistake stays safe).

use super::{AdminSettings, AmqpSettings, MysqlSettings, RedisSettings, Settings};

/// What a secret is shown as.
const REDACTED: &str = "<redacted>";

impl Settings {
    /// The settings as YAML with secrets replaced, for `stockd config print`.
    pub fn redacted_yaml(&self) -> anyhow::Result<String> {
        let mut copy = self.clone();
        if copy.admin.token.is_some() {
            copy.admin.token = Some(REDACTED.into());
        }
        copy.mysql.url = redact_url_password(&copy.mysql.url);
        copy.amqp.url = redact_url_password(&copy.amqp.url);
        redact_each(&mut copy.amqp.urls);
        copy.redis.url = redact_url_password(&copy.redis.url);
        redact_each(&mut copy.redis.urls);
        Ok(serde_yaml::to_string(&copy)?)
    }
}

impl std::fmt::Debug for AdminSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a secret: never let a `{:?}` print it.
        let shown = self.token.as_ref().map(|_| REDACTED);
        f.debug_struct("AdminSettings")
            .field("token", &shown)
            .finish()
    }
}

/// Debug output of the sections with URLs: the password in a URL never shows.
macro_rules! debug_redacting_url {
    ($($name:ident $([$list:ident])?),*) => {$(
        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut shown = self.clone();
                shown.url = redact_url_password(&shown.url);
                $(redact_each(&mut shown.$list);)?
                let yaml = serde_yaml::to_string(&shown).map_err(|_| std::fmt::Error)?;
                write!(f, "{} {{ {} }}", stringify!($name), yaml.trim().replace('\n', ", "))
            }
        }
    )*};
}

debug_redacting_url!(MysqlSettings, RedisSettings[urls], AmqpSettings[urls]);

fn redact_each(urls: &mut [String]) {
    for url in urls {
        *url = redact_url_password(url);
    }
}

/// `scheme://user:password@host` becomes `scheme://user:<redacted>@host`;
/// a URL without a password is returned as it is.
fn redact_url_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((userinfo, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:{REDACTED}@{host}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{repo_config, Settings};

    #[test]
    fn secrets_are_never_printed() {
        let vars = vec![
            ("STOCKD__ADMIN__TOKEN".to_string(), "hunter2".to_string()),
            (
                "STOCKD__MYSQL__URL".to_string(),
                "mysql://app:pw123@db:3306/stockd".to_string(),
            ),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        let printed = s.redacted_yaml().unwrap();
        assert!(
            !printed.contains("hunter2") && !printed.contains("pw123"),
            "{printed}"
        );
        let debug = format!("{s:?}");
        assert!(
            !debug.contains("hunter2") && !debug.contains("pw123"),
            "{debug}"
        );
    }
}
