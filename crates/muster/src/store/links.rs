//! What the links store keeps: links and their clicks per day (see `crate::links` for the rules).

/// Where a link sends a visitor whose app is not installed, per platform; `None` falls back to
/// the link's own URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fallbacks {
    pub ios: Option<String>,
    pub android: Option<String>,
    pub desktop: Option<String>,
}

impl Fallbacks {
    pub fn is_empty(&self) -> bool {
        *self == Fallbacks::default()
    }
}

/// One link, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRecord {
    pub code: String,
    pub url: String,
    /// Who created it: `user:<uuid>`, `key` or `public`.
    pub owner: String,
    /// A plain link: the owner's next request for the same URL gets this code again.
    pub reusable: bool,
    pub fallbacks: Fallbacks,
    /// Unix milliseconds after which the link answers 410 Gone.
    pub expires_at_ms: Option<i64>,
    /// Visits after which the link answers 410 Gone.
    pub max_visits: Option<i64>,
    /// Visits taken against `max_visits` (counted for links with a limit only; the clicks per
    /// day count every visit of every link).
    pub visits: i64,
    pub disabled: bool,
    pub create_time_ms: i64,
}

/// Clicks on one link on one day, to add to its counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClickCount {
    pub code: String,
    /// UTC days since 1970-01-01.
    pub day: i32,
    pub count: i64,
}
