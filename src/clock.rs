//! Wall-clock helpers every layer uses: "now" in epoch milliseconds and the
//! RFC 3339 form the API, the audit and the reconciler print. They live at the
//! ground of the crate so `ops` need not reach up into `roles::api` for a format.

use std::time::{SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Milliseconds since the Unix epoch on this host's clock.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Formats milliseconds since the epoch as RFC 3339 (UTC, millisecond precision).
pub fn rfc3339_ms(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// Reads an RFC 3339 time (any offset) as milliseconds since the epoch;
/// None for text that is not RFC 3339 or a time before the epoch.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    let ms = t.unix_timestamp_nanos() / 1_000_000;
    i64::try_from(ms).ok().filter(|ms| *ms >= 0)
}

/// Formats milliseconds since the epoch as RFC 3339 (UTC) with exactly three
/// digits of fraction, also for a whole second (`POST /v1/passes`'s
/// `expires_at`, whose contract says milliseconds).
pub fn rfc3339_millis(ms: u64) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    let nanos = i128::from(ms) * 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339_ms(1_500), "1970-01-01T00:00:01.5Z");
        assert_eq!(rfc3339_millis(1_000), "1970-01-01T00:00:01.000Z");
        assert_eq!(rfc3339_millis(1_500), "1970-01-01T00:00:01.500Z");
    }

    #[test]
    fn rfc3339_reads_back_with_any_offset() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.5Z"), Some(1_500));
        assert_eq!(parse_rfc3339_ms("1970-01-01T01:00:01+01:00"), Some(1_000));
        assert_eq!(parse_rfc3339_ms("tomorrow"), None);
        assert_eq!(parse_rfc3339_ms("1969-12-31T23:59:59Z"), None);
    }
}
