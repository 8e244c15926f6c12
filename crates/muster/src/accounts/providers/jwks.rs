//! Providers' key sets (JWKS), cached by URL, and the ID tokens (RS256 JWTs) checked with them.
//!
//! A key set is fetched on first use and kept for `keys_cache_sec`. A token naming a key id the
//! cached set lacks fetches the set again (the provider may have rotated its keys), but at most
//! once per `keys_refetch_min_sec` per set, so a flood of made-up key ids costs the provider one
//! call. Callers that miss at the same time share one fetch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::http::{Gate, Http};
use super::{ProviderError, SocialConfig};

/// Keys read from one key set at most.
pub const MAX_KEYS: usize = 32;
/// Longest token read (Apple's and Google's are about 1 KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// Clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_SEC: u64 = 60;

pub struct JwksCache {
    ttl: Duration,
    refetch_min: Duration,
    sets: Mutex<HashMap<String, Arc<KeySet>>>,
}

#[derive(Default)]
struct KeySet {
    /// Held while the set is fetched, so callers missing at once share one fetch.
    fetch: tokio::sync::Mutex<()>,
    cached: Mutex<Cached>,
}

#[derive(Default)]
struct Cached {
    keys: HashMap<String, DecodingKey>,
    fetched_at: Option<Instant>,
    /// The last fetch made for an unknown key id.
    kid_refetched_at: Option<Instant>,
}

/// What the cache can say of a key id without the network.
#[derive(Debug)]
enum Lookup {
    Found(DecodingKey),
    /// The set is fresh, lacks the key id, and was refetched for an unknown key id too
    /// recently to be again.
    Unknown,
    /// The set must be fetched: it is stale or was never fetched (`for_kid` false), or it lacks
    /// the key id (`for_kid` true).
    Fetch {
        for_kid: bool,
    },
}

impl JwksCache {
    pub fn new(config: &SocialConfig) -> JwksCache {
        JwksCache {
            ttl: Duration::from_secs(config.keys_cache_sec),
            refetch_min: Duration::from_secs(config.keys_refetch_min_sec),
            sets: Mutex::new(HashMap::new()),
        }
    }

    fn lookup(&self, cached: &Cached, kid: &str, now: Instant) -> Lookup {
        let fresh = cached
            .fetched_at
            .is_some_and(|at| now.saturating_duration_since(at) < self.ttl);
        if !fresh {
            return Lookup::Fetch { for_kid: false };
        }
        if let Some(key) = cached.keys.get(kid) {
            return Lookup::Found(key.clone());
        }
        let recently = cached
            .kid_refetched_at
            .is_some_and(|at| now.saturating_duration_since(at) < self.refetch_min);
        if recently {
            Lookup::Unknown
        } else {
            Lookup::Fetch { for_kid: true }
        }
    }

    /// The key `kid` of the set at `url`, fetched through `gate` when needed.
    pub async fn key(
        &self,
        http: &Http,
        gate: &Gate,
        url: &str,
        kid: &str,
    ) -> Result<DecodingKey, ProviderError> {
        let provider = gate.provider();
        let unknown = || {
            ProviderError::Refused(
                provider,
                "the token's key id is not in the provider's key set".into(),
            )
        };
        let set = Arc::clone(self.sets.lock().entry(url.to_owned()).or_default());
        let started = Instant::now();
        let lookup = self.lookup(&set.cached.lock(), kid, started);
        match lookup {
            Lookup::Found(key) => return Ok(key),
            Lookup::Unknown => return Err(unknown()),
            Lookup::Fetch { .. } => {}
        }
        let _fetching = set.fetch.lock().await;
        let now = Instant::now();
        let for_kid = {
            let mut cached = set.cached.lock();
            if cached.fetched_at.is_some_and(|at| at >= started) {
                // Fetched by another caller while this one waited: its answer is this one's.
                return cached.keys.get(kid).cloned().ok_or_else(unknown);
            }
            match self.lookup(&cached, kid, now) {
                Lookup::Found(key) => return Ok(key),
                Lookup::Unknown => return Err(unknown()),
                Lookup::Fetch { for_kid } => {
                    if for_kid {
                        cached.kid_refetched_at = Some(now);
                    }
                    for_kid
                }
            }
        };
        let keys = fetch(http, gate, url).await?;
        tracing::debug!(
            provider = provider.name(),
            keys = keys.len(),
            for_unknown_kid = for_kid,
            "sign-in: key set fetched"
        );
        let key = keys.get(kid).cloned();
        {
            let mut cached = set.cached.lock();
            cached.keys = keys;
            cached.fetched_at = Some(Instant::now());
        }
        key.ok_or_else(unknown)
    }

    /// Checks `token` (an RS256 JWT) by `rules`: its signature with a key of the set at
    /// `keys_url`, `iss` among `issuers`, `aud` among `audiences`, `exp` (and `nbf` when
    /// present); answers its claims.
    pub async fn verify<C: DeserializeOwned>(
        &self,
        http: &Http,
        gate: &Gate,
        rules: &TokenRules<'_>,
        token: &str,
    ) -> Result<C, ProviderError> {
        let provider = gate.provider();
        let refused = |why: String| ProviderError::Refused(provider, why);
        if token.len() > MAX_TOKEN_BYTES {
            return Err(refused(format!(
                "token longer than {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| refused(format!("not a JWT: {e}")))?;
        if header.alg != Algorithm::RS256 {
            return Err(refused(format!(
                "token signed with {:?}, not RS256",
                header.alg
            )));
        }
        let kid = header
            .kid
            .ok_or_else(|| refused("token names no key id".into()))?;
        let key = self.key(http, gate, rules.keys_url, &kid).await?;
        jsonwebtoken::decode::<C>(token, &key, &validation(rules.issuers, rules.audiences))
            .map(|data| data.claims)
            .map_err(|e| refused(format!("token not valid: {e}")))
    }
}

/// Where an ID token's keys are, and whom it must come from and be for.
pub struct TokenRules<'a> {
    pub keys_url: &'a str,
    pub issuers: &'a [String],
    pub audiences: &'a [String],
}

/// The checks of an ID token's claims: RS256 only, `iss`, `aud`, `exp` and `sub` present,
/// `iss` and `aud` among those given, not expired (nor not yet valid), a minute's leeway.
pub fn validation(issuers: &[String], audiences: &[String]) -> Validation {
    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.set_issuer(issuers);
    validation.set_audience(audiences);
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.leeway = LEEWAY_SEC;
    validation
}

async fn fetch(
    http: &Http,
    gate: &Gate,
    url: &str,
) -> Result<HashMap<String, DecodingKey>, ProviderError> {
    let provider = gate.provider();
    let unavailable = |why: String| ProviderError::Unavailable(provider, why);
    let parsed =
        url::Url::parse(url).map_err(|e| unavailable(format!("bad keys URL setting: {e}")))?;
    let reply = http.get(gate, parsed).await?;
    if !reply.is_ok() {
        return Err(unavailable(format!("key set answered {}", reply.status)));
    }
    let keys = parse_key_set(&reply.body).map_err(unavailable)?;
    if keys.is_empty() {
        return Err(unavailable("key set has no usable RS256 key".into()));
    }
    Ok(keys)
}

/// The RS256 signing keys of a JWKS document, by key id; keys of other kinds, for encryption, or
/// without an id are skipped, and at most [`MAX_KEYS`] are kept.
pub fn parse_key_set(body: &[u8]) -> Result<HashMap<String, DecodingKey>, String> {
    #[derive(Deserialize)]
    struct KeySetDocument {
        keys: Vec<serde_json::Value>,
    }
    let document: KeySetDocument =
        serde_json::from_slice(body).map_err(|e| format!("key set unreadable: {e}"))?;
    let mut keys = HashMap::new();
    for value in document.keys {
        if keys.len() == MAX_KEYS {
            break;
        }
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        if !matches!(jwk.algorithm, AlgorithmParameters::RSA(_)) {
            continue;
        }
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        if jwk
            .common
            .key_algorithm
            .is_some_and(|alg| alg != KeyAlgorithm::RS256)
        {
            continue;
        }
        let Some(kid) = jwk.common.key_id.clone() else {
            continue;
        };
        if let Ok(key) = DecodingKey::from_jwk(&jwk) {
            keys.insert(kid, key);
        }
    }
    Ok(keys)
}

/// A claim that providers send as a boolean or as `"true"`/`"false"` (Apple's `email_verified`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Flag {
    Bool(bool),
    Text(String),
    Other(serde_json::Value),
}

impl Flag {
    /// False only for an explicit false.
    pub fn not_false(flag: &Option<Flag>) -> bool {
        match flag {
            Some(Flag::Bool(value)) => *value,
            Some(Flag::Text(text)) => !text.eq_ignore_ascii_case("false"),
            Some(Flag::Other(_)) | None => true,
        }
    }
}

/// The claims read from Apple's, Google's and Facebook Limited Login's tokens. Claims of an
/// unexpected type are read as absent.
#[derive(Debug, Clone, Deserialize)]
pub struct IdClaims {
    pub sub: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub email: Option<String>,
    #[serde(default)]
    pub email_verified: Option<Flag>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    pub picture: Option<String>,
}

impl IdClaims {
    /// The email, unless the token says it is not verified.
    pub fn verified_email(&self) -> Option<String> {
        if Flag::not_false(&self.email_verified) {
            self.email.clone()
        } else {
            None
        }
    }
}

fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    Ok(match value {
        serde_json::Value::String(text) => Some(text),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, EncodingKey, Header};
    use serde_json::json;

    const SECRET: &[u8] = b"unit-test-secret";

    fn now() -> i64 {
        jsonwebtoken::get_current_timestamp() as i64
    }

    /// Claims checked as for an RS256 token, with an HMAC key standing in for the provider's.
    fn check(claims: serde_json::Value) -> Result<IdClaims, jsonwebtoken::errors::ErrorKind> {
        let token = encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(SECRET),
        )
        .expect("encodes");
        let mut rules = validation(
            &["https://issuer.example".to_string()],
            &[
                "com.example.game".to_string(),
                "com.example.other".to_string(),
            ],
        );
        rules.algorithms = vec![Algorithm::HS256];
        jsonwebtoken::decode::<IdClaims>(&token, &DecodingKey::from_secret(SECRET), &rules)
            .map(|data| data.claims)
            .map_err(|e| e.into_kind())
    }

    fn good() -> serde_json::Value {
        json!({"iss": "https://issuer.example", "aud": "com.example.other", "sub": "player-1",
               "exp": now() + 600, "email": "p@example.com", "email_verified": "true"})
    }

    #[test]
    fn a_token_for_a_configured_audience_from_the_issuer_passes() {
        let claims = check(good()).expect("valid");
        assert_eq!(claims.sub, "player-1");
        assert_eq!(claims.verified_email().as_deref(), Some("p@example.com"));
    }

    #[test]
    fn wrong_issuer_audience_expired_or_missing_claims_are_refused() {
        use jsonwebtoken::errors::ErrorKind;
        let mut claims = good();
        claims["iss"] = json!("https://elsewhere.example");
        assert_eq!(check(claims).unwrap_err(), ErrorKind::InvalidIssuer);

        let mut claims = good();
        claims["aud"] = json!("com.example.not-ours");
        assert_eq!(check(claims).unwrap_err(), ErrorKind::InvalidAudience);

        let mut claims = good();
        claims["aud"] = json!(["com.example.not-ours", "com.example.game"]);
        assert!(
            check(claims).is_ok(),
            "one configured audience among several"
        );

        let mut claims = good();
        claims["exp"] = json!(now() - LEEWAY_SEC as i64 - 10);
        assert_eq!(check(claims).unwrap_err(), ErrorKind::ExpiredSignature);

        let mut claims = good();
        claims["nbf"] = json!(now() + 3600);
        assert_eq!(check(claims).unwrap_err(), ErrorKind::ImmatureSignature);

        for missing in ["iss", "aud", "exp", "sub"] {
            let mut claims = good();
            claims.as_object_mut().expect("object").remove(missing);
            assert!(check(claims).is_err(), "{missing} is required");
        }
    }

    #[test]
    fn an_unverified_email_is_dropped_and_odd_claims_read_as_absent() {
        let mut claims = good();
        claims["email_verified"] = json!(false);
        assert_eq!(check(claims).expect("valid").verified_email(), None);
        let mut claims = good();
        claims["email_verified"] = json!("false");
        assert_eq!(check(claims).expect("valid").verified_email(), None);
        let mut claims = good();
        claims["name"] = json!(42);
        claims["picture"] = json!({"data": 1});
        claims
            .as_object_mut()
            .expect("object")
            .remove("email_verified");
        let claims = check(claims).expect("valid");
        assert_eq!(claims.name, None);
        assert_eq!(claims.picture, None);
        assert_eq!(claims.verified_email().as_deref(), Some("p@example.com"));
    }

    #[test]
    fn key_sets_keep_rs256_signing_keys_with_ids_only() {
        let body = json!({"keys": [
            {"kty": "RSA", "kid": "a", "use": "sig", "alg": "RS256", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "kid": "b", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "alg": "RS256", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "kid": "ps", "alg": "PS256", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "alg": "RS256", "n": "AQAB", "e": "AQAB"},
            {"kty": "EC", "kid": "ec", "crv": "P-256", "x": "AQAB", "y": "AQAB"},
            {"kty": "weird", "kid": "w"}
        ]});
        let keys = parse_key_set(body.to_string().as_bytes()).expect("parses");
        let mut ids: Vec<_> = keys.keys().cloned().collect();
        ids.sort();
        assert_eq!(ids, ["a", "b"]);
        assert!(parse_key_set(b"not json").is_err());

        let many: Vec<_> = (0..100)
            .map(|i| json!({"kty": "RSA", "kid": format!("k{i}"), "n": "AQAB", "e": "AQAB"}))
            .collect();
        let keys = parse_key_set(json!({ "keys": many }).to_string().as_bytes()).expect("parses");
        assert_eq!(keys.len(), MAX_KEYS);
    }

    #[test]
    fn unknown_key_ids_refetch_at_most_once_per_period() {
        let config = SocialConfig {
            keys_cache_sec: 3600,
            keys_refetch_min_sec: 30,
            ..SocialConfig::default()
        };
        let cache = JwksCache::new(&config);
        let t0 = Instant::now();
        let mut cached = Cached::default();
        assert!(matches!(
            cache.lookup(&cached, "a", t0),
            Lookup::Fetch { for_kid: false }
        ));
        cached
            .keys
            .insert("a".into(), DecodingKey::from_secret(SECRET));
        cached.fetched_at = Some(t0);
        assert!(matches!(cache.lookup(&cached, "a", t0), Lookup::Found(_)));
        // An unknown id right after a fetch: one refetch, then none for 30 s.
        assert!(matches!(
            cache.lookup(&cached, "new", t0),
            Lookup::Fetch { for_kid: true }
        ));
        cached.kid_refetched_at = Some(t0);
        let soon = t0 + Duration::from_secs(29);
        assert!(matches!(
            cache.lookup(&cached, "bogus", soon),
            Lookup::Unknown
        ));
        let later = t0 + Duration::from_secs(30);
        assert!(matches!(
            cache.lookup(&cached, "bogus", later),
            Lookup::Fetch { for_kid: true }
        ));
        // Past the cache's lifetime every lookup fetches.
        let stale = t0 + Duration::from_secs(3600);
        assert!(matches!(
            cache.lookup(&cached, "a", stale),
            Lookup::Fetch { for_kid: false }
        ));
    }
}
