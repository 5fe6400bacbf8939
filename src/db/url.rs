//! `mysql.url` as the driver reads it. The configuration is checked with the
//! parser that will later connect (`config_check.rs` asks here), so a URL the
//! driver would refuse is refused at start-up by its key, and the user the
//! production check reads is the one the driver would log in as.

/// Why the driver refuses `url`, in its own words (`None`: it accepts it).
pub fn refusal(url: &str) -> Option<String> {
    mysql_async::Opts::from_url(url)
        .err()
        .map(|err| err.to_string())
}

/// The user `url` names (`None`: none, or a URL the driver refuses, which
/// [`refusal`] reports).
pub fn user(url: &str) -> Option<String> {
    let opts = mysql_async::Opts::from_url(url).ok()?;
    opts.user().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_is_read_the_way_the_driver_logs_in() {
        assert_eq!(
            user("mysql://root@127.0.0.1:3306/stockd").as_deref(),
            Some("root")
        );
        assert_eq!(user("mysql://127.0.0.1:3306/stockd"), None);
        assert!(refusal("mysql://127.0.0.1:3306/stockd").is_none());
        assert!(refusal("postgres://x@h/db").is_some());
    }
}
