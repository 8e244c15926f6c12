//! The `[links]` section: the invite-link shortener (`crate::links`) on its own listener.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinksConfig {
    /// Address of the links service (its own listener, so that it can own a domain's root);
    /// empty disables it.
    pub listen: String,
    /// Base of the short URLs handed out (`https://go.example.com`); empty: `http://` and the
    /// `Host` the client called.
    pub public_url: String,
    /// Anyone may create links, without a session token or the API key (per-IP limits apply).
    pub public_create: bool,
    /// Key that may create links without limits and read or disable any link (`Authorization:
    /// Bearer <key>`); empty: no such key.
    pub api_key: String,
    /// Links one client IP may create per minute without credentials; 0: no limit.
    pub public_creates_per_ip_per_min: u32,
    /// Links one account may create per minute with its session token; 0: no limit.
    pub creates_per_account_per_min: u32,
    /// Redirects, QR codes and pages one client IP may ask for per second; 0: no limit.
    pub requests_per_ip_per_sec: u32,
    /// Burst on top of `requests_per_ip_per_sec`.
    pub request_burst: u32,
    /// Longest URL accepted (the long URL and each fallback), in bytes.
    pub max_url_bytes: usize,
    /// Length of a generated code (base62; 7 characters: 3.5 × 10¹² codes).
    pub code_length: usize,
    /// Hosts (and their subdomains) that links may not point to.
    pub blocked_domains: Vec<String>,
    /// Most links kept in the in-memory cache of hot codes.
    pub cache_entries: usize,
    /// How long a cached link is trusted before it is read again (a link disabled on another
    /// node stops redirecting here within this).
    pub cache_ttl_ms: u64,
    /// How often the click counts gathered in memory are written (one batch); a click is
    /// durable within this.
    pub clicks_flush_ms: u64,
    /// Apple app ids (`TEAMID.bundle.id`) for `apple-app-site-association`; empty: not served.
    pub apple_app_ids: Vec<String>,
    /// Path patterns the iOS apps open (the association's `components`).
    pub apple_paths: Vec<String>,
    /// Android package name for `/.well-known/assetlinks.json`; empty: not served.
    pub android_package: String,
    /// SHA-256 fingerprints of the Android app's signing certificates (`AA:BB:…`, 32 bytes).
    pub android_sha256_fingerprints: Vec<String>,
}

impl Default for LinksConfig {
    fn default() -> Self {
        LinksConfig {
            listen: "0.0.0.0:7352".into(),
            public_url: String::new(),
            public_create: false,
            api_key: String::new(),
            public_creates_per_ip_per_min: 10,
            creates_per_account_per_min: 60,
            requests_per_ip_per_sec: 1000,
            request_burst: 2000,
            max_url_bytes: 2048,
            code_length: 7,
            blocked_domains: Vec::new(),
            cache_entries: 100_000,
            cache_ttl_ms: 60_000,
            clicks_flush_ms: 1000,
            apple_app_ids: Vec::new(),
            apple_paths: vec!["/*".into()],
            android_package: String::new(),
            android_sha256_fingerprints: Vec::new(),
        }
    }
}

/// The longest URL a setting may allow: PostgreSQL indexes the long URL (for the reverse
/// lookup), and a B-tree entry must fit in a third of a page.
pub const MAX_URL_BYTES_LIMIT: usize = 2500;

impl LinksConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !self.listen.is_empty() && self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(format!(
                "links.listen must be an IP:port address or empty, not {:?}",
                self.listen
            ));
        }
        if !self.public_url.is_empty() {
            let parsed = url::Url::parse(&self.public_url)
                .map_err(|e| format!("links.public_url is not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https")
                || parsed.host_str().is_none()
                || parsed.query().is_some()
                || parsed.path() != "/"
            {
                return Err(format!(
                    "links.public_url must be http(s)://host[:port] with no path or query, not {:?}",
                    self.public_url
                ));
            }
        }
        if !(64..=MAX_URL_BYTES_LIMIT).contains(&self.max_url_bytes) {
            return Err(format!(
                "links.max_url_bytes must be between 64 and {MAX_URL_BYTES_LIMIT}"
            ));
        }
        if !(5..=32).contains(&self.code_length) {
            return Err("links.code_length must be between 5 and 32".into());
        }
        if self.requests_per_ip_per_sec > 0 && self.request_burst == 0 {
            return Err(
                "links.request_burst must be at least 1 when links.requests_per_ip_per_sec is set"
                    .into(),
            );
        }
        if self.cache_entries == 0 || self.cache_ttl_ms == 0 || self.clicks_flush_ms == 0 {
            return Err(
                "links.cache_entries, cache_ttl_ms and clicks_flush_ms must be at least 1".into(),
            );
        }
        for domain in &self.blocked_domains {
            if domain.is_empty() || domain.contains(['/', ':', ' ']) {
                return Err(format!(
                    "links.blocked_domains: {domain:?} is not a host name (write example.com)"
                ));
            }
        }
        for id in &self.apple_app_ids {
            match id.split_once('.') {
                Some((team, bundle))
                    if team.len() == 10
                        && team.chars().all(|c| c.is_ascii_alphanumeric())
                        && !bundle.is_empty() => {}
                _ => {
                    return Err(format!(
                    "links.apple_app_ids: {id:?} is not TEAMID.bundle.id (a 10-character team id)"
                ))
                }
            }
        }
        if !self.apple_app_ids.is_empty() && self.apple_paths.is_empty() {
            return Err("links.apple_paths must name at least one path pattern".into());
        }
        for fingerprint in &self.android_sha256_fingerprints {
            let bytes: Vec<&str> = fingerprint.split(':').collect();
            if bytes.len() != 32
                || !bytes
                    .iter()
                    .all(|b| b.len() == 2 && b.chars().all(|c| c.is_ascii_hexdigit()))
            {
                return Err(format!(
                    "links.android_sha256_fingerprints: {fingerprint:?} is not 32 hex bytes joined by ':'"
                ));
            }
        }
        if self.android_package.is_empty() != self.android_sha256_fingerprints.is_empty() {
            return Err(
                "links.android_package and links.android_sha256_fingerprints go together".into(),
            );
        }
        Ok(())
    }
}
