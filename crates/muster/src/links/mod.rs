//! Invite links: a URL shortener for a game's invite and referral links, with iOS and Android
//! deep links (the published "URL shortener in 2 hours", grown up).
//!
//! - A link maps a code (random base62, `code`, or a creator's custom slug) to a long URL
//!   (`target`: http(s) only, no credentials, not blocked, not the shortener itself), with an
//!   optional expiry, visit limit and per-platform fallbacks (`platform`).
//! - A plain link (none of those) is found again: the same creator asking for the same URL gets
//!   the same code, decided by the store's unique index, so concurrent creates agree.
//! - Visits are served from a bounded cache of hot codes (`cache`) and counted in memory,
//!   written in one batch a second (`clicks`); a link with a visit limit instead takes each
//!   visit in a conditional write, so its limit is exact.
//! - Who may create is the creator's kind ([`Creator`]): an account (session token), the API key,
//!   or anyone when `links.public_create` is on — each with its own rate limit.
//!
//! No HTTP here: `net::links` serves it on its own listener.

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod apps;
pub(crate) mod cache;
pub(crate) mod clicks;
pub(crate) mod code;
pub(crate) mod metrics;
pub(crate) mod platform;
pub(crate) mod qr;
pub(crate) mod target;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use self::apps::AppAssociations;
use self::cache::{HotLink, HotLinks};
use self::clicks::PendingClicks;
use self::metrics::LinkMetrics;
use self::platform::Platform;
use self::target::TargetRules;
use crate::base::clock::Clock;
use crate::base::metrics::Metrics;
use crate::base::ratelimit::{IpLimit, KeyedLimit};
use crate::links::config::LinksConfig;
use crate::links::store::{Fallbacks, LinkRecord, LinkStore};
use crate::store::StoreError;

/// A day in milliseconds: clicks are counted per UTC day (days since 1970-01-01).
pub const DAY_MS: i64 = 86_400_000;

/// The longest expiry a link may ask for: ten years.
const MAX_EXPIRY_SEC: i64 = 10 * 365 * 86_400;

/// Who is creating a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Creator {
    /// No credentials, from this IP (only when `links.public_create` is on).
    Public(IpAddr),
    /// A player, by their session token.
    Account(Uuid),
    /// Whoever holds `links.api_key`.
    ApiKey,
}

impl Creator {
    /// How the store records the link's owner.
    fn owner(&self) -> String {
        match self {
            Creator::Public(_) => "public".into(),
            Creator::Account(id) => format!("user:{id}"),
            Creator::ApiKey => "key".into(),
        }
    }
}

/// Who is reading or disabling a link: its owner's account, or the API key (any link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    Account(Uuid),
    ApiKey,
}

/// A request for a link, as a client sent it.
#[derive(Debug, Clone, Default)]
pub struct LinkRequest {
    pub url: String,
    /// A custom code; `None` (or empty) draws a random one.
    pub slug: Option<String>,
    /// Seconds from now after which the link answers 410 Gone.
    pub expires_in_sec: Option<i64>,
    /// Visits after which the link answers 410 Gone.
    pub max_visits: Option<i64>,
    /// Where each platform's visitors go when the app is not installed (unchecked yet).
    pub fallbacks: Fallbacks,
}

/// A link handed back to its creator, and whether this request created it (`false`: the same
/// creator's existing link to the same URL).
#[derive(Debug, Clone)]
pub struct Created {
    pub link: LinkRecord,
    pub created: bool,
}

/// How many days of clicks a stats read may cover (a year and a bit).
pub const MAX_STATS_DAYS: u32 = 400;

/// A link, its visits in the days read, and its clicks on each of those days that had any (UTC
/// days since 1970-01-01, count), oldest first.
#[derive(Debug, Clone)]
pub struct LinkStats {
    pub link: LinkRecord,
    pub visits: i64,
    pub clicks: Vec<(i32, i64)>,
}

/// Why a links request was refused.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    TooManyRequests(String),
    #[error("That code is already in use; choose another slug.")]
    SlugTaken,
    #[error("No link has that code.")]
    NotFound,
    #[error("{0}")]
    Gone(String),
    #[error("That link belongs to someone else.")]
    NotYours,
    /// The store is closed (shutting down) or the database cannot be reached: nothing changed.
    #[error("{0}")]
    Unavailable(&'static str),
    #[error("internal server error")]
    Internal,
}

impl From<StoreError> for LinkError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound => LinkError::NotFound,
            StoreError::CodeTaken => LinkError::SlugTaken,
            StoreError::Closed => LinkError::Unavailable("Server is shutting down."),
            StoreError::Unavailable(detail) => {
                tracing::warn!(%detail, "database unavailable");
                LinkError::Unavailable("The database is unavailable; try again shortly.")
            }
            StoreError::UsernameTaken
            | StoreError::CredentialTaken
            | StoreError::LimitReached
            | StoreError::Refused(_)
            | StoreError::Database(_) => {
                tracing::error!(%error, "links store error");
                LinkError::Internal
            }
        }
    }
}

/// The links service.
pub struct Links {
    store: Arc<dyn LinkStore>,
    rules: TargetRules,
    code_length: usize,
    public_create: bool,
    public_limit: IpLimit,
    account_limit: KeyedLimit<Uuid>,
    hot: HotLinks,
    clicks: PendingClicks,
    flush_every: Duration,
    apps: AppAssociations,
    clock: Clock,
    metrics: LinkMetrics,
}

impl Links {
    pub fn new(
        config: &LinksConfig,
        store: Arc<dyn LinkStore>,
        metrics: &Metrics,
        clock: Clock,
    ) -> Links {
        Links {
            store,
            rules: TargetRules::new(
                config.max_url_bytes,
                &config.blocked_domains,
                &config.public_url,
            ),
            code_length: config.code_length,
            public_create: config.public_create,
            public_limit: IpLimit::per_minute(config.public_creates_per_ip_per_min),
            account_limit: KeyedLimit::per_minute(config.creates_per_account_per_min),
            hot: HotLinks::new(
                config.cache_entries,
                Duration::from_millis(config.cache_ttl_ms),
            ),
            clicks: PendingClicks::default(),
            flush_every: Duration::from_millis(config.clicks_flush_ms),
            apps: AppAssociations::from_config(config),
            clock,
            metrics: LinkMetrics::register(metrics.registry()),
        }
    }

    /// The app association documents (served as they are).
    pub fn apps(&self) -> &AppAssociations {
        &self.apps
    }

    /// Creates a link for `creator`, or hands back its existing link to the same URL. `called_as`
    /// is the host:port the client reached the shortener on (no link may point there).
    pub async fn create(
        &self,
        creator: Creator,
        request: LinkRequest,
        called_as: Option<&str>,
    ) -> Result<Created, LinkError> {
        let result = self.try_create(creator, request, called_as).await;
        let outcome = match &result {
            Ok(Created { created: true, .. }) => "created",
            Ok(Created { created: false, .. }) => "existing",
            Err(_) => "refused",
        };
        self.metrics.creates.with_label_values(&[outcome]).inc();
        result
    }

    async fn try_create(
        &self,
        creator: Creator,
        request: LinkRequest,
        called_as: Option<&str>,
    ) -> Result<Created, LinkError> {
        self.admit(creator)?;
        let url = self
            .rules
            .check("url", &request.url, called_as)
            .map_err(LinkError::Invalid)?;
        let fallback = |field: &str, raw: Option<String>| -> Result<Option<String>, LinkError> {
            match raw.filter(|r| !r.trim().is_empty()) {
                Some(raw) => self
                    .rules
                    .check(field, &raw, called_as)
                    .map(Some)
                    .map_err(LinkError::Invalid),
                None => Ok(None),
            }
        };
        let fallbacks = Fallbacks {
            ios: fallback("fallbacks.ios", request.fallbacks.ios)?,
            android: fallback("fallbacks.android", request.fallbacks.android)?,
            desktop: fallback("fallbacks.desktop", request.fallbacks.desktop)?,
        };
        let slug = request.slug.filter(|s| !s.is_empty());
        if let Some(problem) = slug.as_deref().and_then(code::slug_problem) {
            return Err(LinkError::Invalid(problem));
        }
        let now_ms = self.clock.now_ms();
        let expires_at_ms = match request.expires_in_sec {
            None => None,
            Some(sec) if (1..=MAX_EXPIRY_SEC).contains(&sec) => Some(now_ms + sec * 1000),
            Some(_) => {
                return Err(LinkError::Invalid(format!(
                    "expires_in_sec must be between 1 and {MAX_EXPIRY_SEC} (ten years)."
                )))
            }
        };
        if request.max_visits.is_some_and(|n| n < 1) {
            return Err(LinkError::Invalid("max_visits must be at least 1.".into()));
        }
        let reusable = slug.is_none()
            && expires_at_ms.is_none()
            && request.max_visits.is_none()
            && fallbacks.is_empty();
        let owner = creator.owner();
        // A drawn code that is taken is drawn again; five collisions in a row at 3.5 × 10¹²
        // codes means something else is wrong.
        for _ in 0..5 {
            let record = LinkRecord {
                code: slug
                    .clone()
                    .unwrap_or_else(|| code::generate(self.code_length)),
                url: url.clone(),
                owner: owner.clone(),
                reusable,
                fallbacks: fallbacks.clone(),
                expires_at_ms,
                max_visits: request.max_visits,
                visits: 0,
                disabled: false,
                create_time_ms: now_ms,
            };
            match self.store.create_link(record).await {
                Ok((link, created)) => return Ok(Created { link, created }),
                Err(StoreError::CodeTaken) if slug.is_some() => return Err(LinkError::SlugTaken),
                Err(StoreError::CodeTaken) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        tracing::error!("five generated link codes in a row were taken");
        Err(LinkError::Internal)
    }

    /// Whether `creator` may create a link now.
    fn admit(&self, creator: Creator) -> Result<(), LinkError> {
        let allowed = match creator {
            Creator::ApiKey => true,
            Creator::Account(id) => self.account_limit.allow(id),
            Creator::Public(_) if !self.public_create => {
                return Err(LinkError::Unauthenticated(
                    "Creating links needs a session token or the links API key.".into(),
                ))
            }
            Creator::Public(ip) => self.public_limit.allow(ip),
        };
        if allowed {
            Ok(())
        } else {
            Err(LinkError::TooManyRequests(
                "Too many links created; wait a minute.".into(),
            ))
        }
    }

    /// A visit of `code` from `platform`: the URL to send the visitor to (without the visitor's
    /// own query string). A `counted` visit is a click and uses up one of a limited link's
    /// visits; one that is not (a link preview, a HEAD request) only looks.
    pub async fn visit(
        &self,
        code: &str,
        platform: Platform,
        counted: bool,
    ) -> Result<String, LinkError> {
        let result = self.try_visit(code, platform, counted).await;
        let outcome = match &result {
            Ok(_) => {
                self.metrics.redirected.inc();
                return result;
            }
            Err(LinkError::NotFound) => "not_found",
            Err(LinkError::Gone(_)) => "gone",
            Err(_) => "failed",
        };
        self.metrics.redirects.with_label_values(&[outcome]).inc();
        result
    }

    async fn try_visit(
        &self,
        code: &str,
        platform: Platform,
        counted: bool,
    ) -> Result<String, LinkError> {
        let hot = self.lookup(code).await?;
        let link = &hot.record;
        let now_ms = self.clock.now_ms();
        if link.disabled {
            return Err(LinkError::Gone("This link has been disabled.".into()));
        }
        if link.expires_at_ms.is_some_and(|at| at <= now_ms) {
            return Err(LinkError::Gone("This link has expired.".into()));
        }
        let day = (now_ms.div_euclid(DAY_MS)) as i32;
        let used_up = || LinkError::Gone("This link has been used up.".into());
        match (link.max_visits, counted) {
            (Some(_), true) => {
                if self.store.take_visit(&link.code, day).await?.is_none() {
                    return Err(used_up());
                }
            }
            (Some(max), false) => {
                // Only a look, but not at a link that is spent: its state is read fresh.
                let now = self
                    .store
                    .link(&link.code)
                    .await?
                    .ok_or(LinkError::NotFound)?;
                if now.disabled || now.visits >= max {
                    return Err(used_up());
                }
            }
            (None, true) => self.clicks.count(&hot.code, day, &self.metrics),
            (None, false) => {}
        }
        let target = match platform {
            Platform::Ios => link.fallbacks.ios.as_ref(),
            Platform::Android => link.fallbacks.android.as_ref(),
            Platform::Desktop => link.fallbacks.desktop.as_ref(),
        };
        Ok(target.unwrap_or(&link.url).clone())
    }

    /// The link with this code, from the cache or the store.
    async fn lookup(&self, code: &str) -> Result<Arc<HotLink>, LinkError> {
        if !code::is_code_shaped(code) {
            return Err(LinkError::NotFound);
        }
        if let Some(hot) = self.hot.get(code) {
            self.metrics.cache_hits.inc();
            return Ok(hot);
        }
        self.metrics.cache.with_label_values(&["miss"]).inc();
        let record = self.store.link(code).await?.ok_or(LinkError::NotFound)?;
        Ok(self.hot.insert(record))
    }

    /// Whether `code` names a link (for QR codes: only of links that exist).
    pub async fn exists(&self, code: &str) -> Result<(), LinkError> {
        self.lookup(code).await.map(|_| ())
    }

    /// A link and its clicks per day, for its owner or the API key. Pending clicks are written
    /// first, so the counts include every visit this node has answered.
    /// The last `days` days are read (today included; at most [`MAX_STATS_DAYS`]).
    pub async fn stats(
        &self,
        code: &str,
        viewer: Viewer,
        days: u32,
    ) -> Result<LinkStats, LinkError> {
        if !(1..=MAX_STATS_DAYS).contains(&days) {
            return Err(LinkError::Invalid(format!(
                "days must be between 1 and {MAX_STATS_DAYS}."
            )));
        }
        let link = self.owned(code, viewer).await?;
        if let Err(error) = self.flush().await {
            tracing::warn!(%error, "writing click counts before a stats read failed");
        }
        let today = self.clock.now_ms().div_euclid(DAY_MS) as i32;
        let window = (0..days as i32).map(|back| today - back).collect();
        let clicks = self.store.link_clicks(&link.code, window).await?;
        let visits = clicks.iter().map(|(_, count)| count).sum();
        Ok(LinkStats {
            link,
            visits,
            clicks,
        })
    }

    /// Disables a link for good: it answers 410 from now on (on other nodes within
    /// `links.cache_ttl_ms`).
    pub async fn disable(&self, code: &str, viewer: Viewer) -> Result<(), LinkError> {
        let link = self.owned(code, viewer).await?;
        self.store
            .disable_link(&link.code, self.clock.now_ms())
            .await?;
        self.hot.forget(&link.code);
        Ok(())
    }

    async fn owned(&self, code: &str, viewer: Viewer) -> Result<LinkRecord, LinkError> {
        if !code::is_code_shaped(code) {
            return Err(LinkError::NotFound);
        }
        let link = self.store.link(code).await?.ok_or(LinkError::NotFound)?;
        match viewer {
            Viewer::ApiKey => Ok(link),
            Viewer::Account(id) if link.owner == Creator::Account(id).owner() => Ok(link),
            Viewer::Account(_) => Err(LinkError::NotYours),
        }
    }

    /// Writes the click counts gathered so far.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.clicks.flush(self.store.as_ref(), &self.metrics).await
    }

    /// Writes click counts every `links.clicks_flush_ms` until `stop`, then once more.
    pub async fn flush_clicks_until(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.flush_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => break,
            }
            if let Err(error) = self.flush().await {
                tracing::warn!(%error, "writing click counts failed; kept for the next flush");
            }
        }
        if let Err(error) = self.flush().await {
            tracing::error!(%error, "writing the last click counts at shutdown failed");
        }
    }

    /// Forgets rate-limit keys whose buckets are full again (housekeeping).
    pub fn prune_limits(&self) {
        self.public_limit.prune();
        self.account_limit.prune();
    }
}
