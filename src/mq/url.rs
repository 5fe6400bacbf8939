//! `amqp.url` and `amqp.urls` as the client reads them: the configuration is
//! checked with the parser that will later connect (`config_check.rs` asks
//! here), so a URL the client would refuse is refused at start-up by its key,
//! and the account the production check reads is the one the client would
//! log in with (a URL without credentials means `guest`/`guest`).

/// The user and password a broker URL logs in with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub username: String,
    pub password: String,
}

/// The account `url` logs in with, or why the client refuses the URL, in
/// its own words (they may quote the URL whole: the caller redacts it).
pub fn login(url: &str) -> Result<Login, String> {
    let uri = url.parse::<lapin::uri::AMQPUri>()?;
    let user = uri.authority.userinfo;
    Ok(Login {
        username: user.username,
        password: user.password,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_credentials_logs_in_as_guest() {
        let guest = login("amqp://127.0.0.1:5672/%2f").unwrap();
        assert_eq!(
            (guest.username.as_str(), guest.password.as_str()),
            ("guest", "guest")
        );
        let own = login("amqp://stockd_app:pw@rabbitmq:5672/%2f").unwrap();
        assert_eq!(own.username, "stockd_app");
        assert!(login("http://a:b@h:5672/%2f").is_err());
    }
}
