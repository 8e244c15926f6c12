//! The `[social]` section: each identity provider's settings. Every URL and key set defaults to
//! the real provider, so tests (and studios behind an egress proxy) can point them elsewhere.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SocialConfig {
    /// Longest one call to a provider may take, waiting for a free slot included, in
    /// milliseconds; past it that login fails as unavailable.
    pub timeout_ms: u64,
    /// Calls in flight to one provider at once; more wait for a slot (within `timeout_ms`).
    pub max_in_flight: usize,
    /// Largest answer read from a provider (a key set, a profile, a friends page), in bytes.
    pub max_response_bytes: usize,
    /// Consecutive failures to reach a provider (no connection, timeout, 5xx, 429) that open its
    /// circuit breaker; 0 never opens it.
    pub breaker_failures: u32,
    /// How long an open breaker fails that provider's logins at once, in milliseconds, before
    /// one probe call is let through (half-open): its success closes the breaker.
    pub breaker_open_ms: u64,
    /// How long fetched keys (Apple's, Google's, Facebook's key sets, Game Center's
    /// certificates) are used before they are fetched again, in seconds.
    pub keys_cache_sec: u64,
    /// A token naming a key id missing from the cached key set fetches the set again, at most
    /// once per this many seconds per key set.
    pub keys_refetch_min_sec: u64,
    pub apple: AppleConfig,
    pub google: GoogleConfig,
    pub facebook: FacebookConfig,
    pub facebook_instant_game: FacebookInstantGameConfig,
    pub steam: SteamConfig,
    pub gamecenter: GameCenterConfig,
}

impl Default for SocialConfig {
    fn default() -> Self {
        SocialConfig {
            timeout_ms: 5000,
            max_in_flight: 64,
            max_response_bytes: 1024 * 1024,
            breaker_failures: 5,
            breaker_open_ms: 30_000,
            keys_cache_sec: 3600,
            keys_refetch_min_sec: 30,
            apple: AppleConfig::default(),
            google: GoogleConfig::default(),
            facebook: FacebookConfig::default(),
            facebook_instant_game: FacebookInstantGameConfig::default(),
            steam: SteamConfig::default(),
            gamecenter: GameCenterConfig::default(),
        }
    }
}

/// Sign in with Apple.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppleConfig {
    /// The app's bundle ids (and Services ids, for the web): a token's audience must be one of
    /// them. Empty: Sign in with Apple is not configured.
    pub bundle_ids: Vec<String>,
    /// Apple's key set (JWKS).
    pub keys_url: String,
    /// The issuer an identity token must name.
    pub issuer: String,
}

impl Default for AppleConfig {
    fn default() -> Self {
        AppleConfig {
            bundle_ids: Vec::new(),
            keys_url: "https://appleid.apple.com/auth/keys".into(),
            issuer: "https://appleid.apple.com".into(),
        }
    }
}

/// Google ID tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GoogleConfig {
    /// The game's OAuth client ids: a token's audience must be one of them. Empty: Google
    /// sign-in is not configured.
    pub client_ids: Vec<String>,
    /// Google's key set (JWKS).
    pub keys_url: String,
    /// The issuers an ID token may name.
    pub issuers: Vec<String>,
}

impl Default for GoogleConfig {
    fn default() -> Self {
        GoogleConfig {
            client_ids: Vec::new(),
            keys_url: "https://www.googleapis.com/oauth2/v3/certs".into(),
            issuers: vec![
                "accounts.google.com".into(),
                "https://accounts.google.com".into(),
            ],
        }
    }
}

/// Facebook: Graph API access tokens, and Limited Login tokens (OIDC JWTs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FacebookConfig {
    /// The Graph API, with its version: `/me` and `/me/friends` are under it.
    pub graph_url: String,
    /// Pages of `/me/friends` read at most for one friends import.
    pub max_friend_pages: usize,
    /// The app id a Limited Login token's audience must be. Empty: Limited Login is not
    /// configured (Graph access tokens work without it).
    #[serde(deserialize_with = "text_or_number")]
    pub app_id: String,
    /// Facebook's Limited Login key set (JWKS).
    pub limited_login_keys_url: String,
    /// The issuers a Limited Login token may name.
    pub limited_login_issuers: Vec<String>,
}

impl Default for FacebookConfig {
    fn default() -> Self {
        FacebookConfig {
            graph_url: "https://graph.facebook.com/v22.0".into(),
            max_friend_pages: 20,
            app_id: String::new(),
            limited_login_keys_url: "https://limited.facebook.com/.well-known/oauth/openid/jwks/"
                .into(),
            limited_login_issuers: vec![
                "https://www.facebook.com".into(),
                "https://facebook.com".into(),
            ],
        }
    }
}

/// Facebook Instant Games' signed player info.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FacebookInstantGameConfig {
    /// The app secret the signed player info is signed with (HMAC-SHA256). Empty: Instant
    /// Games sign-in is not configured.
    pub app_secret: String,
    /// Signed player info issued longer ago than this (its `issued_at`), in seconds, is
    /// refused; 0 accepts any age.
    pub max_age_sec: u64,
}

/// Steam session tickets, through Steam's Web API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SteamConfig {
    /// The publisher Web API key. Empty: Steam is not configured.
    pub publisher_key: String,
    /// The game's Steam app id. 0: Steam is not configured.
    pub app_id: u32,
    /// Steam's partner Web API.
    pub api_url: String,
}

impl Default for SteamConfig {
    fn default() -> Self {
        SteamConfig {
            publisher_key: String::new(),
            app_id: 0,
            api_url: "https://partner.steam-api.com".into(),
        }
    }
}

/// Game Center's identity verification signatures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GameCenterConfig {
    /// The app's bundle ids: a signature for another one is refused. Empty: any bundle id.
    pub bundle_ids: Vec<String>,
    /// Hosts the signing certificate may be fetched from (a host or a domain, its subdomains
    /// included), over HTTPS; plain HTTP only to a loopback address listed here.
    pub key_url_hosts: Vec<String>,
    /// A signature whose timestamp is further than this from the server's clock, in seconds,
    /// is refused; 0 accepts any timestamp.
    pub max_age_sec: u64,
}

impl Default for GameCenterConfig {
    fn default() -> Self {
        GameCenterConfig {
            bundle_ids: Vec::new(),
            key_url_hosts: vec!["apple.com".into()],
            max_age_sec: 3600,
        }
    }
}

/// A setting that is text but often written as a number (Facebook's app ids): an environment
/// variable `MUSTER_SOCIAL__FACEBOOK__APP_ID=4242` reads as a number.
fn text_or_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Number(u64),
    }
    Ok(match Either::deserialize(deserializer)? {
        Either::Text(text) => text,
        Either::Number(number) => number.to_string(),
    })
}
