//! What the links store keeps: links and their clicks per day (see `crate::links` for the rules).

use async_trait::async_trait;

use crate::store::StoreError;

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

/// Invite links and their clicks.
/// Each write is durable when its future resolves.
#[async_trait]
pub trait LinkStore: Send + Sync {
    /// Stores `link`. When it is reusable and its owner already has a reusable link to the same
    /// URL, returns that link instead, and `false`; concurrent calls for one URL agree on one
    /// link. `CodeTaken` when another link has the code.
    async fn create_link(&self, link: LinkRecord) -> Result<(LinkRecord, bool), StoreError>;

    /// The link with this code, disabled or not.
    async fn link(&self, code: &str) -> Result<Option<LinkRecord>, StoreError>;

    /// Counts one visit on `day` of a link with a visit limit, only if it is enabled and under
    /// its limit: the visits counted now, or `None` when it may not be visited.
    async fn take_visit(&self, code: &str, day: i32) -> Result<Option<i64>, StoreError>;

    /// Adds clicks to the links' per-day counts, in one transaction.
    async fn add_clicks(&self, clicks: Vec<ClickCount>) -> Result<(), StoreError>;

    /// A link's clicks on each of `days` that had any (day, count), oldest first.
    async fn link_clicks(&self, code: &str, days: Vec<i32>) -> Result<Vec<(i32, i64)>, StoreError>;

    /// Disables a link for good (it answers 410 from then on); `NotFound` when there is none.
    async fn disable_link(&self, code: &str, now_ms: i64) -> Result<(), StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] =
    &[crate::migration!(5, "links", "0005_links")];
