//! `redis.url` and `redis.urls` as the client reads them: the configuration
//! is checked with the parser that will later connect (`config_check.rs` asks
//! here), so a URL the client would refuse is refused at start-up by its key.

/// Why the client refuses `url`, in its own words (`None`: it accepts it).
pub fn refusal(url: &str) -> Option<String> {
    deadpool_redis::redis::Client::open(url)
        .err()
        .map(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_judges_the_scheme() {
        assert!(refusal("redis://127.0.0.1:6379").is_none());
        assert!(refusal("rediss://127.0.0.1:6380").is_none());
        assert!(refusal("http://127.0.0.1:6379").is_some());
    }
}
