//! Join tokens: what the matchmaker gives matched players and what a room's connection info
//! gives a player (its "ticket"). A token is an HS256 JWT naming one match and one user, valid for
//! `matches.join_token_expiry_sec`, and usable once: its id is remembered as used until it
//! expires, so a leaked or replayed token cannot seat a second player.
//!
//! Tokens are signed with their own key (`matches.join_token_key`, else a key generated once and
//! kept in the database like the session keys), so a join token can never pass for a session
//! token or the reverse.

use std::sync::Arc;

use dashmap::DashMap;
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::MatchError;
use super::id::MatchId;
use super::metrics::MatchMetrics;
use crate::store::{SecretStore, StoreError};

/// What a join token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinClaims {
    /// Token id: the unit of single use.
    pub jti: Uuid,
    /// The match's uuid.
    pub mid: Uuid,
    /// Whether the match is authoritative (else relayed, created on first join).
    pub auth: bool,
    /// The only user who may use the token.
    pub uid: Uuid,
    /// That user's username (a TCP connection has no session token to read it from).
    pub usn: String,
    /// Expiry, unix seconds.
    pub exp: i64,
}

impl JoinClaims {
    pub fn match_id(&self) -> MatchId {
        MatchId {
            uuid: self.mid,
            authoritative: self.auth,
        }
    }
}

pub struct JoinTokens {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    ttl_sec: i64,
    /// Used token ids and their expiry.
    used: DashMap<Uuid, i64>,
    metrics: Arc<MatchMetrics>,
}

impl JoinTokens {
    /// Uses `configured` as key, or the key kept in the store (generated on first start).
    pub async fn open(
        configured: &str,
        ttl_sec: u64,
        secrets: &dyn SecretStore,
        metrics: Arc<MatchMetrics>,
    ) -> Result<JoinTokens, StoreError> {
        let key = if configured.is_empty() {
            use rand::Rng;
            let bytes: [u8; 32] = rand::rng().random();
            let candidate: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            secrets.secret("join_token_key", candidate).await?
        } else {
            configured.to_owned()
        };
        Ok(JoinTokens::new(&key, ttl_sec, metrics))
    }

    pub fn new(key: &str, ttl_sec: u64, metrics: Arc<MatchMetrics>) -> JoinTokens {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp"]);
        JoinTokens {
            encoding: EncodingKey::from_secret(key.as_bytes()),
            decoding: DecodingKey::from_secret(key.as_bytes()),
            validation,
            ttl_sec: ttl_sec as i64,
            used: DashMap::new(),
            metrics,
        }
    }

    /// A token for `user` to join `id`, and its expiry (unix seconds).
    pub fn issue(&self, id: MatchId, user: Uuid, username: &str) -> (String, i64) {
        let exp = crate::base::clock::now_secs() + self.ttl_sec;
        (self.issue_until(id, user, username, exp), exp)
    }

    /// A token expiring at `exp` (unix seconds); tests use it to make expired tokens.
    pub fn issue_until(&self, id: MatchId, user: Uuid, username: &str, exp: i64) -> String {
        let claims = JoinClaims {
            jti: Uuid::new_v4(),
            mid: id.uuid,
            auth: id.authoritative,
            uid: user,
            usn: username.to_owned(),
            exp,
        };
        // HS256 over our own claims cannot fail.
        encode(&Header::new(Algorithm::HS256), &claims, &self.encoding).unwrap_or_default()
    }

    /// Checks signature and expiry; the token is not used up yet (see [`JoinTokens::consume`]).
    pub fn verify(&self, token: &str) -> Result<JoinClaims, MatchError> {
        decode::<JoinClaims>(token, &self.decoding, &self.validation)
            .map(|data| data.claims)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
                    MatchError::TokenSpent("Join token expired.".into())
                }
                _ => MatchError::BadInput("Join token invalid.".into()),
            })
    }

    /// Marks the token used; an error if it already was.
    pub fn consume(&self, claims: &JoinClaims) -> Result<(), MatchError> {
        use dashmap::mapref::entry::Entry;
        match self.used.entry(claims.jti) {
            Entry::Occupied(_) => Err(MatchError::TokenSpent("Join token already used.".into())),
            Entry::Vacant(slot) => {
                slot.insert(claims.exp);
                self.metrics.used_tokens.inc();
                Ok(())
            }
        }
    }

    /// Gives a token back after a join that failed for a reason not the token's own.
    pub fn release(&self, claims: &JoinClaims) {
        if self.used.remove(&claims.jti).is_some() {
            self.metrics.used_tokens.dec();
        }
    }

    /// Forgets used tokens that have expired (they are refused as expired from then on).
    pub fn prune(&self) {
        let now = crate::base::clock::now_secs();
        let before = self.used.len();
        self.used.retain(|_, exp| *exp >= now);
        let removed = before.saturating_sub(self.used.len());
        self.metrics.used_tokens.sub(removed as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> JoinTokens {
        let metrics = Arc::new(MatchMetrics::register(&prometheus::Registry::new()));
        JoinTokens::new("k", 60, metrics)
    }

    #[test]
    fn single_use_expiring_and_signed() {
        let tokens = tokens();
        let id = MatchId::new_authoritative("t");
        let user = Uuid::new_v4();
        let (token, _) = tokens.issue(id, user, "ann");
        let claims = tokens.verify(&token).expect("valid");
        assert_eq!((claims.match_id(), claims.uid), (id, user));
        tokens.consume(&claims).expect("first use");
        assert!(tokens.consume(&claims).is_err(), "second use");
        tokens.release(&claims);
        tokens.consume(&claims).expect("released, usable again");

        let expired = tokens.issue_until(id, user, "ann", crate::base::clock::now_secs() - 5);
        assert_eq!(
            tokens.verify(&expired),
            Err(MatchError::TokenSpent("Join token expired.".into()))
        );
        let other = JoinTokens::new("other key", 60, tokens.metrics.clone());
        let (forged, _) = other.issue(id, user, "ann");
        assert!(tokens.verify(&forged).is_err());
        assert!(tokens.verify("garbage").is_err());
    }
}
