//! Session and refresh tokens: HS256 JWTs carrying the claims Nakama's clients read
//! (`uid` user id, `usn` username, `vrs` session variables, `exp` expiry) plus `tid`, the token
//! pair's id, by which a logout revokes both tokens of a pair.
//!
//! Session and refresh tokens are signed with different keys, so one can never pass for the other.
//!
//! A refresh issues a new pair and leaves the old session token working until it expires, as
//! Nakama does (a client refreshing while requests are in flight gets no 401s). The refresh
//! token itself works once by default (`session.refresh_token_single_use`): using it records the
//! revocation of its *refresh id* (derived from the pair's id) with one conditional write in the
//! store, so of two refreshes with it, on one node or many, one succeeds. With the setting off it
//! works until it expires or its pair is logged out, as in Nakama.
//!
//! Revocations live in the store until both tokens of their pair would have expired (a restart
//! forgets nothing, every node sees them). Each node also keeps in memory the revocations whose
//! *session* token may still be alive (at most `session.token_expiry_sec` after it learned of
//! them), so a session check is a map look-up, never a database read. A refresh token is not
//! trusted to that map: a refresh is decided in the store (see [`TokenService::consume_refresh`]).
//!
//! Nodes learn of other nodes' revocations over the cluster's bus at once and, as a backstop,
//! by reading what was stored since their last look ([`TokenService::reload_revocations`]),
//! never the whole table; expired rows are pruned.

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::accounts::store::{Revocation, TokenStore};
use crate::base::clock::Clock;
use crate::store::{SecretStore, StoreError};

/// How far before the previous look's clock each reload of revocations starts: longer than a
/// write takes from its statement to its commit.
pub const RELOAD_OVERLAP_MS: i64 = 30_000;

/// The claims of both token kinds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// Token pair id.
    pub tid: Uuid,
    /// User id.
    pub uid: Uuid,
    /// Username.
    pub usn: String,
    /// Session variables.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub vrs: HashMap<String, String>,
    /// Expiry, unix seconds.
    pub exp: i64,
    /// Issued at, unix seconds.
    pub iat: i64,
}

/// Why a token was refused; the text is shown to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("Auth token expired")]
    Expired,
    #[error("Auth token revoked")]
    Revoked,
    #[error("Auth token invalid")]
    Invalid,
}

struct Keys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

impl Keys {
    fn new(secret: &str) -> Keys {
        Keys {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
        }
    }
}

pub struct TokenService {
    session: Keys,
    refresh: Keys,
    token_ttl: i64,
    refresh_ttl: i64,
    /// A refresh token works once (else until it expires or is logged out).
    refresh_single_use: bool,
    validation: Validation,
    /// Issue and expiry times come from here (a test moves it instead of sleeping).
    clock: Clock,
    /// Revoked pair ids whose session token may still be alive, with when to forget them.
    revoked: DashMap<Uuid, i64>,
    /// Banned users: every token of theirs is refused (`Accounts::ban`).
    banned: dashmap::DashSet<Uuid>,
    /// Where the next [`TokenService::reload_revocations`] reads from (the store's clock, ms).
    reload_from_ms: std::sync::atomic::AtomicI64,
    store: Arc<dyn TokenStore>,
    /// Told of revocations made here (the cluster passes them to the other nodes).
    observer: std::sync::OnceLock<Arc<dyn RevocationObserver>>,
}

/// Told of every revocation made on this node, once it is stored.
pub trait RevocationObserver: Send + Sync {
    fn revoked(&self, revocations: &[Revocation]);
}

/// A freshly issued pair.
pub struct TokenPair {
    pub token: String,
    pub refresh_token: String,
}

impl TokenService {
    /// Builds the service from configured keys, or keys generated once and kept in the store.
    pub async fn new(
        config: &crate::accounts::config::SessionConfig,
        secrets: &dyn SecretStore,
        store: Arc<dyn TokenStore>,
        clock: Clock,
    ) -> Result<TokenService, StoreError> {
        let session_key =
            key_or_stored(&config.encryption_key, "session_encryption_key", secrets).await?;
        let refresh_key = key_or_stored(
            &config.refresh_encryption_key,
            "refresh_encryption_key",
            secrets,
        )
        .await?;
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp"]);
        // Expiry is checked against `clock` below, not by the JWT library's own system clock.
        validation.validate_exp = false;
        let service = TokenService {
            session: Keys::new(&session_key),
            refresh: Keys::new(&refresh_key),
            token_ttl: config.token_expiry_sec as i64,
            refresh_ttl: config.refresh_token_expiry_sec as i64,
            refresh_single_use: config.refresh_token_single_use,
            validation,
            clock: clock.clone(),
            revoked: DashMap::new(),
            banned: dashmap::DashSet::new(),
            // At start: every revocation whose session token may still be alive.
            reload_from_ms: std::sync::atomic::AtomicI64::new(
                (clock.now_secs() - config.token_expiry_sec as i64) * 1000 - RELOAD_OVERLAP_MS,
            ),
            store,
            observer: std::sync::OnceLock::new(),
        };
        service.reload_revocations().await?;
        Ok(service)
    }

    /// Issues a session and refresh token pair for a user.
    pub fn issue(&self, user_id: Uuid, username: &str, vars: HashMap<String, String>) -> TokenPair {
        let now = self.clock.now_secs();
        let mut claims = Claims {
            tid: Uuid::new_v4(),
            uid: user_id,
            usn: username.to_owned(),
            vrs: vars,
            exp: now + self.token_ttl,
            iat: now,
        };
        let header = Header::new(Algorithm::HS256);
        // Encoding HS256 with a valid key cannot fail for these claims.
        let token = encode(&header, &claims, &self.session.encoding).unwrap_or_default();
        claims.exp = now + self.refresh_ttl;
        let refresh_token = encode(&header, &claims, &self.refresh.encoding).unwrap_or_default();
        TokenPair {
            token,
            refresh_token,
        }
    }

    /// The claims of a valid, unexpired, unrevoked session token.
    pub fn verify_session(&self, token: &str) -> Result<Claims, TokenError> {
        self.verify(token, &self.session)
    }

    /// The claims of a valid, unexpired refresh token whose pair this node does not know to be
    /// revoked (the store has the last word: [`TokenService::consume_refresh`]).
    pub fn verify_refresh(&self, token: &str) -> Result<Claims, TokenError> {
        let claims = self.verify(token, &self.refresh)?;
        if self.revoked.contains_key(&refresh_id(claims.tid)) {
            return Err(TokenError::Revoked);
        }
        Ok(claims)
    }

    fn verify(&self, token: &str, keys: &Keys) -> Result<Claims, TokenError> {
        let claims = decode::<Claims>(token, &keys.decoding, &self.validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => TokenError::Expired,
                _ => TokenError::Invalid,
            })?
            .claims;
        if claims.exp < self.clock.now_secs() {
            return Err(TokenError::Expired);
        }
        if self.revoked.contains_key(&claims.tid) || self.banned.contains(&claims.uid) {
            return Err(TokenError::Revoked);
        }
        Ok(claims)
    }

    /// Revokes token pairs: refused from now on, here and after a restart.
    pub async fn revoke(&self, pairs: &[(Uuid, i64)]) -> Result<(), StoreError> {
        // Both tokens of each pair: the session token by the pair's id, the refresh token by its
        // refresh id too, so that no later refresh with it can record that id first.
        let both: Vec<(Uuid, i64)> = pairs
            .iter()
            .flat_map(|&(tid, iat)| [(tid, iat), (refresh_id(tid), iat)])
            .collect();
        let revocations = self.revocations(&both);
        self.store.revoke(revocations.clone()).await?;
        self.remember(&revocations);
        Ok(())
    }

    /// Whether the refresh token of pair `claims` may be used, deciding in the store. Single use
    /// (the default): true for the one call that records the revocation of its refresh id, false
    /// when it was already recorded — by an earlier refresh, a logout of the pair, or a
    /// concurrent refresh of the same token on any node; one conditional write decides. Reusable:
    /// true unless the pair was logged out. The pair's session token is left as it is.
    pub async fn consume_refresh(&self, claims: &Claims) -> Result<bool, StoreError> {
        let id = refresh_id(claims.tid);
        if !self.refresh_single_use {
            return Ok(!self.store.is_revoked(id).await?);
        }
        let revocations = self.revocations(&[(id, claims.iat)]);
        let recorded = self.store.revoke(revocations.clone()).await?;
        self.remember(&revocations);
        Ok(recorded == 1)
    }

    fn revocations(&self, pairs: &[(Uuid, i64)]) -> Vec<Revocation> {
        // The refresh token outlives the session token: keep the revocation as long as either.
        pairs
            .iter()
            .map(|&(token_id, issued_at)| Revocation {
                token_id,
                expires_at: issued_at + self.token_ttl.max(self.refresh_ttl),
            })
            .collect()
    }

    /// Adds stored revocations to the map and tells the observer (the cluster's relay).
    fn remember(&self, revocations: &[Revocation]) {
        let now = self.clock.now_secs();
        self.insert(revocations.iter().map(|r| (r, now)));
        if let Some(observer) = self.observer.get() {
            observer.revoked(revocations);
        }
    }

    /// Keeps each revocation in memory for as long as its session token may be alive: its pair
    /// was issued before the revocation was recorded (`recorded_at`, Unix seconds), so the
    /// session token is dead `token_ttl` after that at the latest.
    fn insert<'a>(&self, revocations: impl IntoIterator<Item = (&'a Revocation, i64)>) {
        let now = self.clock.now_secs();
        for (r, recorded_at) in revocations {
            let forget_at = r.expires_at.min(recorded_at + self.token_ttl);
            if forget_at > now {
                self.revoked.insert(r.token_id, forget_at);
            }
        }
    }

    /// Sets who is told of this node's revocations (once; later calls are ignored).
    pub fn observe_revocations(&self, observer: Arc<dyn RevocationObserver>) {
        let _ = self.observer.set(observer);
    }

    /// Revocations another node made (and stored): refused here from now on, without waiting
    /// for the periodic reload from the store.
    pub fn revoked_elsewhere(&self, revocations: &[Revocation]) {
        let now = self.clock.now_secs();
        self.insert(revocations.iter().map(|r| (r, now)));
    }

    /// Forgets what has expired, in memory and in the store, and reads the revocations stored
    /// since the last look (other nodes' whose message this node missed); run periodically.
    /// Each look starts [`RELOAD_OVERLAP_MS`] before the previous one's clock, so a revocation
    /// stored just before that look but committed after it is still found.
    pub async fn reload_revocations(&self) -> Result<(), StoreError> {
        use std::sync::atomic::Ordering;
        let now = self.clock.now_secs();
        self.revoked.retain(|_, forget_at| *forget_at > now);
        self.store.prune_revocations(now).await?;
        let since = self.reload_from_ms.load(Ordering::Relaxed);
        let (recent, clock_ms) = self.store.revocations_since(since, now).await?;
        // The store's clock may differ a little from this node's: the overlap covers that.
        self.insert(
            recent
                .iter()
                .map(|(r, recorded_ms)| (r, (recorded_ms + RELOAD_OVERLAP_MS) / 1000)),
        );
        self.reload_from_ms
            .store(clock_ms - RELOAD_OVERLAP_MS, Ordering::Relaxed);
        Ok(())
    }

    /// Refuses (`banned`) or accepts again every token of `users`.
    pub fn set_banned(&self, users: &[Uuid], banned: bool) {
        for user in users {
            if banned {
                self.banned.insert(*user);
            } else {
                self.banned.remove(user);
            }
        }
    }

    /// The longest any token issued now lives (a refresh token's lifetime, usually), seconds.
    pub fn longest_lifetime_secs(&self) -> i64 {
        self.token_ttl.max(self.refresh_ttl)
    }

    /// Whether `user` is banned.
    pub fn is_banned(&self, user: &Uuid) -> bool {
        self.banned.contains(user)
    }

    /// The banned users are exactly `users` (as the store lists them).
    pub fn replace_banned(&self, users: &[Uuid]) {
        let keep: std::collections::HashSet<&Uuid> = users.iter().collect();
        self.banned.retain(|user| keep.contains(user));
        for user in users {
            self.banned.insert(*user);
        }
    }

    /// Revocations held in memory now (a gauge for tests and metrics).
    pub fn revocations_in_memory(&self) -> usize {
        self.revoked.len()
    }

    /// Signs arbitrary claims with the session key; tests use it to make expired tokens.
    pub fn sign_session_claims(&self, claims: &Claims) -> String {
        encode(
            &Header::new(Algorithm::HS256),
            claims,
            &self.session.encoding,
        )
        .unwrap_or_default()
    }
}

/// The id under which a pair's refresh token is used up or revoked: the pair's id with its bits
/// flipped (a pair's id is random, so it names no other pair).
fn refresh_id(pair: Uuid) -> Uuid {
    Uuid::from_u128(!pair.as_u128())
}

async fn key_or_stored(
    configured: &str,
    name: &str,
    store: &dyn SecretStore,
) -> Result<String, StoreError> {
    if !configured.is_empty() {
        return Ok(configured.to_owned());
    }
    let candidate: String = {
        use rand::Rng;
        let bytes: [u8; 32] = rand::rng().random();
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    };
    store.secret(name, candidate).await
}
