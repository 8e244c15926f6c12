//! Sign-in with the stores' and social networks' identities: each provider's proof (a token, a
//! signed blob, a signature) checked against the provider (its keys, its API), answering the
//! player's id there and what the provider tells of them. Accounts link and find players by
//! that id; this module never touches the store.
//!
//! Every remote call has a timeout, a bound on calls in flight and a circuit breaker per
//! provider: a provider that is down fails that provider's logins quickly with a clear error,
//! never the node.

mod apple;
pub mod breaker;
pub mod config;
mod facebook;
pub mod facebook_instant;
pub mod gamecenter;
mod google;
mod http;
pub mod jwks;
mod steam;

use std::sync::Arc;

pub use config::SocialConfig;

/// An identity provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    Apple,
    Google,
    Facebook,
    FacebookInstantGame,
    Steam,
    GameCenter,
}

impl Provider {
    /// The provider's name in Nakama's error messages ("Could not authenticate Apple profile.").
    pub fn name(self) -> &'static str {
        match self {
            Provider::Apple => "Apple",
            Provider::Google => "Google",
            Provider::Facebook => "Facebook",
            Provider::FacebookInstantGame => "Facebook Instant Game",
            Provider::Steam => "Steam",
            Provider::GameCenter => "GameCenter",
        }
    }

    /// The account's column holding the player's id at this provider (Nakama's names).
    pub fn column(self) -> &'static str {
        match self {
            Provider::Apple => "apple_id",
            Provider::Google => "google_id",
            Provider::Facebook => "facebook_id",
            Provider::FacebookInstantGame => "facebook_instant_game_id",
            Provider::Steam => "steam_id",
            Provider::GameCenter => "gamecenter_id",
        }
    }
}

/// What a player presents to prove who they are at a provider, as received.
#[derive(Debug, Clone)]
pub enum ProviderProof {
    /// Sign in with Apple's identity token (a JWT).
    Apple { token: String },
    /// A Google ID token (a JWT).
    Google { token: String },
    /// A Facebook access token, or a Limited Login token (an OIDC JWT).
    Facebook { token: String },
    /// Facebook Instant Games' signed player info (`<signature>.<payload>`).
    FacebookInstantGame { signed_player_info: String },
    /// A Steam session ticket (hex).
    Steam { token: String },
    /// Game Center's identity verification signature and what it signs.
    GameCenter {
        player_id: String,
        bundle_id: String,
        timestamp_seconds: i64,
        salt: String,
        signature: String,
        public_key_url: String,
    },
}

impl ProviderProof {
    /// The provider and token of a proof whose provider has a friends' list to import
    /// (Facebook, Steam).
    pub fn friends_token(&self) -> Option<(Provider, String)> {
        match self {
            ProviderProof::Facebook { token } => Some((Provider::Facebook, token.clone())),
            ProviderProof::Steam { token } => Some((Provider::Steam, token.clone())),
            _ => None,
        }
    }

    pub fn provider(&self) -> Provider {
        match self {
            ProviderProof::Apple { .. } => Provider::Apple,
            ProviderProof::Google { .. } => Provider::Google,
            ProviderProof::Facebook { .. } => Provider::Facebook,
            ProviderProof::FacebookInstantGame { .. } => Provider::FacebookInstantGame,
            ProviderProof::Steam { .. } => Provider::Steam,
            ProviderProof::GameCenter { .. } => Provider::GameCenter,
        }
    }
}

/// Who a proof names, as the provider tells it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderProfile {
    /// The player's id at the provider (Apple's and Google's `sub`, the Facebook or Steam id,
    /// the Instant Games or Game Center player id).
    pub id: String,
    /// A verified email, when the provider gives one.
    pub email: Option<String>,
    pub display_name: Option<String>,
    pub avatar_url: Option<String>,
}

/// Why a proof was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The provider's settings are missing (no bundle id, no publisher key, no app secret).
    #[error("{} authentication is not configured.", .0.name())]
    NotConfigured(Provider),
    /// The proof is not valid: a bad signature, the wrong audience, expired, unknown to the
    /// provider. The cause is for the log, not the client.
    #[error("could not authenticate {name} profile: {1}", name = .0.name())]
    Refused(Provider, String),
    /// The provider could not be asked: down, timed out, or its breaker is open.
    #[error("{name} is unavailable: {1}", name = .0.name())]
    Unavailable(Provider, String),
}

/// The providers' checks, with their clients, key caches and breakers.
pub struct Providers {
    config: SocialConfig,
    http: http::Http,
    gates: Gates,
    jwks: jwks::JwksCache,
    gamecenter_keys: gamecenter::KeyCache,
}

/// Each remote provider's bound on calls in flight and breaker (Instant Games is offline).
struct Gates {
    apple: http::Gate,
    google: http::Gate,
    facebook: http::Gate,
    steam: http::Gate,
    gamecenter: http::Gate,
}

impl Providers {
    pub fn new(config: SocialConfig) -> Arc<Self> {
        let gate = |provider| http::Gate::new(provider, &config);
        let gates = Gates {
            apple: gate(Provider::Apple),
            google: gate(Provider::Google),
            facebook: gate(Provider::Facebook),
            steam: gate(Provider::Steam),
            gamecenter: gate(Provider::GameCenter),
        };
        Arc::new(Providers {
            http: http::Http::new(&config),
            jwks: jwks::JwksCache::new(&config),
            gamecenter_keys: gamecenter::KeyCache::new(&config),
            gates,
            config,
        })
    }

    /// Checks `proof` with its provider: the player it names.
    pub async fn verify(&self, proof: &ProviderProof) -> Result<ProviderProfile, ProviderError> {
        match proof {
            ProviderProof::Apple { token } => apple::verify(self, token).await,
            ProviderProof::Google { token } => google::verify(self, token).await,
            ProviderProof::Facebook { token } => facebook::verify(self, token).await,
            ProviderProof::FacebookInstantGame { signed_player_info } => {
                facebook_instant::verify(self, signed_player_info)
            }
            ProviderProof::Steam { token } => steam::verify(self, token).await,
            ProviderProof::GameCenter {
                player_id,
                bundle_id,
                timestamp_seconds,
                salt,
                signature,
                public_key_url,
            } => {
                let proof = gamecenter::Proof {
                    player_id,
                    bundle_id,
                    timestamp: *timestamp_seconds,
                    salt,
                    signature,
                    public_key_url,
                };
                gamecenter::verify(self, proof).await
            }
        }
    }

    /// The Facebook ids of the friends of the player whose access token this is (Graph API
    /// `/me/friends`, every page up to a bound).
    pub async fn facebook_friends(&self, token: &str) -> Result<Vec<String>, ProviderError> {
        facebook::friends(self, token).await
    }

    /// The Steam ids of the friends of `steam_id` (Steam Web API `GetFriendList`).
    pub async fn steam_friends(&self, steam_id: &str) -> Result<Vec<String>, ProviderError> {
        steam::friends(self, steam_id).await
    }
}

/// Longest id kept (Nakama's columns hold 128 characters).
const MAX_ID_CHARS: usize = 128;
/// Longest email and display name kept (as Nakama, a longer one is not imported).
const MAX_NAME_CHARS: usize = 255;
/// Longest avatar URL kept (as Nakama).
const MAX_AVATAR_CHARS: usize = 512;

/// The profile a provider answered: its id must be there and fit; an email, name or avatar that
/// is empty or too long is left out.
fn profile(
    provider: Provider,
    id: String,
    email: Option<String>,
    display_name: Option<String>,
    avatar_url: Option<String>,
) -> Result<ProviderProfile, ProviderError> {
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
        return Err(ProviderError::Refused(
            provider,
            format!("the provider's player id is empty or longer than {MAX_ID_CHARS} characters"),
        ));
    }
    let keep = |value: Option<String>, max: usize| {
        value.filter(|v| !v.is_empty() && v.chars().count() <= max)
    };
    Ok(ProviderProfile {
        id,
        email: keep(email, MAX_NAME_CHARS),
        display_name: keep(display_name, MAX_NAME_CHARS),
        avatar_url: keep(avatar_url, MAX_AVATAR_CHARS),
    })
}
