//! Who is calling: every credential an HTTP route accepts, parsed and checked in one place.
//!
//! | extractor | accepts | routes |
//! |---|---|---|
//! | [`ServerKey`] | HTTP Basic with `server_key` as user name | authenticate, session refresh |
//! | [`Player`] | `Authorization: Bearer <session token>` | account, logout, channel history, economy |
//! | [`RpcCaller`] | `?http_key=`, or HTTP Basic with `runtime.http_key`, or a session token | `/v2/rpc/{id}` |
//! | [`RoomsCaller`] | a session token, or HTTP Basic with `rooms.admin_key` (when set) | `/v2/rooms…` |
//! | [`MetricsScraper`] | `Authorization: Bearer <metrics.token>` (when set) | `/metrics` |
//! | [`GatewayCaller`] | `Authorization: Bearer <gateway.api_key or a session token>` | `/graphql` |
//! | [`LinkCaller`] | `Authorization: Bearer <links.api_key or a session token>`, or nothing | the links service |
//!
//! Keys are compared in constant time; session tokens are verified by
//! [`TokenService`](crate::accounts::tokens::TokenService) (signature, expiry, revocation). A
//! refusal is always 401 with Nakama's error body and never says which part was wrong beyond
//! what the client needs to fix its request.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Query};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use base64::Engine;
use serde::Deserialize;

use super::error::ApiError;
use crate::accounts::tokens::Claims;
use crate::net::state::AppState;
use crate::services::Services;

/// Compares secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The credential in a request's `Authorization` header.
enum Presented<'a> {
    /// HTTP Basic: the user name (Nakama's clients send a key there, with an empty password);
    /// `None` when the value is not base64.
    Basic(Option<Vec<u8>>),
    Bearer(&'a str),
    /// No header, or a scheme no route accepts.
    Nothing,
}

fn presented(parts: &Parts) -> Presented<'_> {
    let Some(value) = parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Presented::Nothing;
    };
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("Bearer") && !rest.is_empty() {
        Presented::Bearer(rest)
    } else if scheme.eq_ignore_ascii_case("Basic") {
        let user = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()
            .map(|decoded| {
                let user = decoded.split(|&b| b == b':').next().unwrap_or_default();
                user.to_vec()
            });
        Presented::Basic(user)
    } else {
        Presented::Nothing
    }
}

/// True when a Basic user name matches `key`.
fn basic_is(user: &Option<Vec<u8>>, key: &str) -> bool {
    user.as_deref()
        .is_some_and(|user| constant_time_eq(user, key.as_bytes()))
}

/// Verifies a session token: the claims, or 401 saying why not.
pub fn verify_session(state: &AppState, token: &str) -> Result<Claims, ApiError> {
    state
        .services
        .tokens
        .verify_session(token)
        .map_err(|e| ApiError::Unauthenticated(e.to_string()))
}

/// Proof that the caller sent the server key as HTTP Basic user name.
pub struct ServerKey;

impl FromRequestParts<AppState> for ServerKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match presented(parts) {
            Presented::Basic(user) if basic_is(&user, &state.services.config.server_key) => {
                Ok(ServerKey)
            }
            Presented::Basic(_) => Err(ApiError::Unauthenticated("Server key invalid.".into())),
            _ => Err(ApiError::Unauthenticated("Server key required.".into())),
        }
    }
}

/// A player's request: the verified claims of their session token, the services (most routes
/// need nothing else) and the app's state.
pub struct Player(pub Claims, pub Arc<Services>, pub AppState);

impl FromRequestParts<AppState> for Player {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match presented(parts) {
            Presented::Bearer(token) => Ok(Player(
                verify_session(state, token)?,
                state.services.clone(),
                state.clone(),
            )),
            _ => Err(ApiError::Unauthenticated("Auth token required.".into())),
        }
    }
}

/// The caller of a server function: a player, or a server holding the HTTP key (which may act
/// for any account).
pub enum RpcCaller {
    Player(Claims),
    Server,
}

#[derive(Deserialize)]
struct HttpKeyQuery {
    http_key: Option<String>,
}

impl FromRequestParts<AppState> for RpcCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let http_key = &state.services.config.runtime.http_key;
        let invalid_key = || ApiError::Unauthenticated("HTTP key invalid.".into());
        let from_query = Query::<HttpKeyQuery>::try_from_uri(&parts.uri)
            .ok()
            .and_then(|Query(q)| q.http_key)
            .filter(|k| !k.is_empty());
        if let Some(key) = from_query {
            return if constant_time_eq(key.as_bytes(), http_key.as_bytes()) {
                Ok(RpcCaller::Server)
            } else {
                Err(invalid_key())
            };
        }
        match presented(parts) {
            Presented::Basic(user) if basic_is(&user, http_key) => Ok(RpcCaller::Server),
            Presented::Basic(_) => Err(invalid_key()),
            Presented::Bearer(token) => verify_session(state, token).map(RpcCaller::Player),
            Presented::Nothing => Err(ApiError::Unauthenticated(
                "Auth token or HTTP key required.".into(),
            )),
        }
    }
}

/// The caller of a rooms route: a player, or a game server holding `rooms.admin_key`.
pub enum RoomsCaller {
    Player(Claims),
    Admin,
}

impl FromRequestParts<AppState> for RoomsCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let admin_key = &state.services.config.rooms.admin_key;
        match presented(parts) {
            Presented::Bearer(token) => verify_session(state, token).map(RoomsCaller::Player),
            Presented::Basic(user) if !admin_key.is_empty() && basic_is(&user, admin_key) => {
                Ok(RoomsCaller::Admin)
            }
            _ => Err(ApiError::Unauthenticated(
                "A session token (Bearer) or the rooms admin key (Basic) is required.".into(),
            )),
        }
    }
}

/// The caller of `/graphql`: a player, or a server holding `gateway.api_key` (when set).
pub enum GatewayCaller {
    Player(Claims),
    Server,
}

impl FromRequestParts<AppState> for GatewayCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let api_key = &state.services.config.gateway.api_key;
        match presented(parts) {
            Presented::Bearer(secret)
                if !api_key.is_empty()
                    && constant_time_eq(secret.as_bytes(), api_key.as_bytes()) =>
            {
                Ok(GatewayCaller::Server)
            }
            Presented::Bearer(token) => verify_session(state, token).map(GatewayCaller::Player),
            _ => Err(ApiError::Unauthenticated(
                "A session token or the gateway API key is required.".into(),
            )),
        }
    }
}

/// A metrics scraper: holds `metrics.token` as Bearer token, or anyone while it is empty.
pub struct MetricsScraper;

impl FromRequestParts<AppState> for MetricsScraper {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let required = &state.services.config.metrics.token;
        if required.is_empty() {
            return Ok(MetricsScraper);
        }
        match presented(parts) {
            Presented::Bearer(given) if constant_time_eq(given.as_bytes(), required.as_bytes()) => {
                Ok(MetricsScraper)
            }
            _ => Err(ApiError::Unauthenticated("Metrics token required.".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(authorization: &str) -> Parts {
        Request::builder()
            .header(AUTHORIZATION, authorization)
            .body(())
            .expect("request")
            .into_parts()
            .0
    }

    #[test]
    fn schemes_are_told_apart_case_insensitively() {
        let basic = base64::engine::general_purpose::STANDARD.encode("key:");
        assert!(matches!(
            presented(&parts(&format!("basic {basic}"))),
            Presented::Basic(Some(user)) if user == b"key"
        ));
        assert!(matches!(
            presented(&parts("BEARER abc ")),
            Presented::Bearer("abc")
        ));
        assert!(matches!(
            presented(&parts("Basic !!!")),
            Presented::Basic(None)
        ));
        assert!(matches!(presented(&parts("Digest x")), Presented::Nothing));
        assert!(matches!(presented(&parts("Bearer ")), Presented::Nothing));
    }

    #[test]
    fn keys_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secre"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!basic_is(&None, ""));
        assert!(basic_is(&Some(b"k".to_vec()), "k"));
    }
}

/// The caller of the links service: the API key holder, a player, or nobody in particular
/// (whether anonymous callers may create links is the links service's rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkCaller {
    Anonymous,
    Account(uuid::Uuid),
    ApiKey,
}

/// A links credential given as a value (a header's bearer token, the index page's key field):
/// `links.api_key` when it matches, else a session token.
pub fn link_caller(state: &AppState, secret: &str) -> Result<LinkCaller, ApiError> {
    let api_key = &state.services.config.links.api_key;
    if !api_key.is_empty() && constant_time_eq(secret.as_bytes(), api_key.as_bytes()) {
        return Ok(LinkCaller::ApiKey);
    }
    verify_session(state, secret).map(|claims| LinkCaller::Account(claims.uid))
}

impl FromRequestParts<AppState> for LinkCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match presented(parts) {
            Presented::Bearer(secret) => link_caller(state, secret),
            Presented::Basic(_) => Err(ApiError::Unauthenticated(
                "Send the links API key or a session token as a bearer token.".into(),
            )),
            Presented::Nothing => Ok(LinkCaller::Anonymous),
        }
    }
}
