//! Wall-clock helpers: the store keeps unix milliseconds, the API shows RFC 3339.

use std::time::{SystemTime, UNIX_EPOCH};

use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn now_secs() -> i64 {
    now_ms() / 1000
}

/// `2026-11-21T01:02:03Z`, the form Nakama's API uses for times.
pub fn rfc3339(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_whole_seconds_in_utc() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_795_000_000_999), "2026-11-18T11:06:40Z");
    }
}
