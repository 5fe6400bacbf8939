//! The samples of a Prometheus text page (`GET /metrics` of a child), read
//! the one way every bench reader of it needs: each line that is not a
//! comment, as its series (name and labels, as written) and its value.

use std::net::SocketAddr;

use crate::drive::api::Api;

/// The child's `GET /metrics` page, on a fresh connection (a kept one may
/// have been closed as idle during a long phase); `None` when the target does
/// not serve `/metrics` there (e.g. `metrics.bind` elsewhere).
pub async fn page(addr: SocketAddr) -> Option<String> {
    Api::new(addr, "").metrics().await.ok()
}

/// `(series, value)` for each sample line of `text` whose value is a number.
pub fn samples(text: &str) -> impl Iterator<Item = (&str, f64)> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series, value.parse::<f64>().ok()?))
        })
}

#[cfg(test)]
mod tests {
    use super::samples;

    #[test]
    fn comments_and_unreadable_values_are_skipped() {
        let text = "# HELP a x\na{b=\"c d\"} 2\nbroken\ne NaNx\nf_sum 1.5\n";
        let read: Vec<_> = samples(text).collect();
        assert_eq!(read, vec![("a{b=\"c d\"}", 2.0), ("f_sum", 1.5)]);
    }
}
