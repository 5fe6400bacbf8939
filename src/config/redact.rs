//! Secrets never printed: the admin token and the passwords in dependency URLs
//! are replaced by `<redacted>` in `stockd config print` and in every `{:?}`
//! of the sections that hold them (a settings struct logged by mistake stays
//! safe); so are everything after the host of `reconcile.webhook_url` and the
//! userinfo and query of `telemetry.otlp.endpoint`.

use super::{
    AdminSettings, AmqpSettings, MysqlSettings, OtlpSettings, ReconcileSettings, RedisSettings,
    Settings,
};

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
        copy.reconcile = redact_reconcile(&copy.reconcile);
        copy.telemetry.otlp = redact_otlp(&copy.telemetry.otlp);
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

/// `Debug` as YAML on one line, like the sections above.
fn debug_yaml<T: serde::Serialize>(
    f: &mut std::fmt::Formatter<'_>,
    name: &str,
    shown: &T,
) -> std::fmt::Result {
    let yaml = serde_yaml::to_string(shown).map_err(|_| std::fmt::Error)?;
    write!(f, "{name} {{ {} }}", yaml.trim().replace('\n', ", "))
}

impl std::fmt::Debug for ReconcileSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_yaml(f, "ReconcileSettings", &redact_reconcile(self))
    }
}

impl std::fmt::Debug for OtlpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_yaml(f, "OtlpSettings", &redact_otlp(self))
    }
}

/// The webhook URL cut after its host: its path or query often is the secret
/// (a chat robot's access token).
fn redact_reconcile(settings: &ReconcileSettings) -> ReconcileSettings {
    let mut shown = settings.clone();
    shown.webhook_url = shown.webhook_url.as_deref().map(redact_url_after_host);
    shown
}

/// The collector's URL without its userinfo and query (where an API key goes).
fn redact_otlp(settings: &OtlpSettings) -> OtlpSettings {
    let mut shown = settings.clone();
    shown.endpoint = shown.endpoint.as_deref().map(redact_url_userinfo_query);
    shown
}

fn redact_each(urls: &mut [String]) {
    for url in urls {
        *url = redact_url_password(url);
    }
}

/// The parts of `scheme://[userinfo@]host[:port][path][?query]`, the way URL
/// parsers (and so the drivers) split them: the authority ends at the first
/// `/`, `?` or `#`, and the userinfo at the last `@` in it, so a password
/// holding `@` stays whole. `None` without `://`.
struct UrlParts<'a> {
    scheme: &'a str,
    userinfo: Option<&'a str>,
    host: &'a str,
    /// Path, query and fragment: what follows the authority.
    tail: &'a str,
}

fn url_parts(url: &str) -> Option<UrlParts<'_>> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => (Some(userinfo), host),
        None => (None, authority),
    };
    Some(UrlParts {
        scheme,
        userinfo,
        host,
        tail,
    })
}

/// `scheme://user:password@host` becomes `scheme://user:<redacted>@host`;
/// a URL without a password is returned as it is.
pub(super) fn redact_url_password(url: &str) -> String {
    let Some(parts) = url_parts(url) else {
        return url.to_string();
    };
    match parts.userinfo.and_then(|u| u.split_once(':')) {
        Some((user, _)) => {
            let UrlParts {
                scheme, host, tail, ..
            } = parts;
            format!("{scheme}://{user}:{REDACTED}@{host}{tail}")
        }
        None => url.to_string(),
    }
}

/// A URL its parser refused, for an error message: its password redacted
/// when it has the shape `scheme://…`, else all of it (a malformed URL may
/// hold its password anywhere).
pub(super) fn redact_malformed_url(url: &str) -> String {
    if url_parts(url).is_some() {
        redact_url_password(url)
    } else {
        REDACTED.to_string()
    }
}

/// `scheme://[userinfo@]host[:port]` kept, anything after it and any userinfo
/// replaced: `https://hooks.example/robot/send?access_token=x` becomes
/// `https://hooks.example/<redacted>`.
fn redact_url_after_host(url: &str) -> String {
    redact_url_with(url, |tail| {
        if tail.is_empty() || tail == "/" {
            tail.to_string()
        } else {
            format!("/{REDACTED}")
        }
    })
}

/// Userinfo and the query (and fragment) replaced, the path kept:
/// `http://k:s@c:4318/otlp?key=x` becomes `http://<redacted>@c:4318/otlp?<redacted>`.
fn redact_url_userinfo_query(url: &str) -> String {
    redact_url_with(url, |tail| match tail.find(['?', '#']) {
        Some(at) => format!("{}?{REDACTED}", &tail[..at]),
        None => tail.to_string(),
    })
}

/// The URL with any userinfo replaced and what follows the host rewritten by
/// `rest`; a URL that does not parse is replaced whole.
fn redact_url_with(url: &str, rest: impl Fn(&str) -> String) -> String {
    let Some(UrlParts {
        scheme,
        userinfo,
        host,
        tail,
    }) = url_parts(url)
    else {
        return REDACTED.to_string();
    };
    let user = userinfo.map_or(String::new(), |_| format!("{REDACTED}@"));
    format!("{scheme}://{user}{host}{}", rest(tail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{repo_config, Settings};

    #[test]
    fn a_password_holding_an_at_sign_is_redacted_whole() {
        assert_eq!(
            redact_url_password("amqp://u:p@ss@host/"),
            "amqp://u:<redacted>@host/"
        );
        assert_eq!(
            redact_url_password("redis://:s3@cr@t@r:6379"),
            "redis://:<redacted>@r:6379"
        );
        // An `@` after the host (a path or query) is not the userinfo's.
        assert_eq!(
            redact_url_password("mysql://u:pw@db/x?a=b@c"),
            "mysql://u:<redacted>@db/x?a=b@c"
        );
        assert_eq!(redact_url_password("amqp://u@host/"), "amqp://u@host/");
        assert_eq!(redact_url_password("not a url"), "not a url");
    }

    #[test]
    fn a_webhook_shows_its_host_and_an_otlp_endpoint_loses_userinfo_and_query() {
        assert_eq!(
            redact_url_after_host("http://hooks.example/robot/send?access_token=t0k"),
            "http://hooks.example/<redacted>"
        );
        assert_eq!(
            redact_url_after_host("http://u:p@ss@relay:8080?t0k"),
            "http://<redacted>@relay:8080/<redacted>"
        );
        assert_eq!(
            redact_url_after_host("http://relay:8080/"),
            "http://relay:8080/"
        );
        assert_eq!(
            redact_url_userinfo_query("http://k:s3@c:4318/otlp?api_key=s3"),
            "http://<redacted>@c:4318/otlp?<redacted>"
        );
        assert_eq!(redact_url_userinfo_query("http://c:4318"), "http://c:4318");
        let vars = vec![
            (
                "STOCKD__RECONCILE__WEBHOOK_URL".to_string(),
                "http://hooks.example/robot/send?access_token=hook-secret-1".to_string(),
            ),
            (
                "STOCKD__TELEMETRY__OTLP__ENDPOINT".to_string(),
                "http://user:otlp-secret-2@collector:4318?key=otlp-secret-3".to_string(),
            ),
        ];
        let s = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap();
        let printed = s.redacted_yaml().unwrap();
        let debug = format!("{s:?}");
        for shown in [&printed, &debug] {
            for secret in ["hook-secret-1", "otlp-secret-2", "otlp-secret-3", "robot"] {
                assert!(!shown.contains(secret), "{secret} in {shown}");
            }
            assert!(shown.contains("http://hooks.example/<redacted>"), "{shown}");
            assert!(shown.contains("collector:4318"), "{shown}");
        }
        // The settings themselves keep the real URLs.
        assert!(s.reconcile.webhook_url.unwrap().contains("hook-secret-1"));
    }

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
