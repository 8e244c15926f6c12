//! Request extractors that turn every kind of bad input into a clear [`ApiError`]: the server key
//! (HTTP Basic), the session token (Bearer), JSON bodies and query strings, the client IP.

use std::net::{IpAddr, SocketAddr};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Query, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use base64::Engine;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::accounts::tokens::Claims;
use crate::state::AppState;

/// Compares secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn authorization<'a>(parts: &'a Parts, scheme: &str) -> Option<&'a str> {
    let value = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (given, rest) = value.split_once(' ')?;
    given.eq_ignore_ascii_case(scheme).then(|| rest.trim())
}

/// Proof that the caller sent the server key as HTTP Basic user name.
pub struct ServerKey;

impl FromRequestParts<AppState> for ServerKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let encoded = authorization(parts, "Basic")
            .ok_or_else(|| ApiError::Unauthenticated("Server key required.".into()))?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| ApiError::Unauthenticated("Server key invalid.".into()))?;
        let key = decoded.split(|&b| b == b':').next().unwrap_or_default();
        if !constant_time_eq(key, state.config.server_key.as_bytes()) {
            return Err(ApiError::Unauthenticated("Server key invalid.".into()));
        }
        Ok(ServerKey)
    }
}

/// The verified claims of the caller's session token (`Authorization: Bearer ...`).
pub struct Caller(pub Claims);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = authorization(parts, "Bearer")
            .ok_or_else(|| ApiError::Unauthenticated("Auth token required.".into()))?;
        let claims = state
            .tokens
            .verify_session(token)
            .map_err(|e| ApiError::Unauthenticated(e.to_string()))?;
        Ok(Caller(claims))
    }
}

/// The client's IP address, from the TCP connection.
pub struct ClientIp(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| ClientIp(addr.ip()))
            .ok_or(ApiError::Internal)
    }
}

/// Refuses the call when the client IP is over its authentication rate.
pub struct AuthRateLimit;

impl FromRequestParts<AppState> for AuthRateLimit {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let ClientIp(ip) = ClientIp::from_request_parts(parts, state).await?;
        if !state.auth_limit.allow(ip) {
            state
                .metrics
                .rate_limited
                .with_label_values(&["auth"])
                .inc();
            return Err(ApiError::TooManyRequests(
                "Too many authentication requests; slow down.".into(),
            ));
        }
        Ok(AuthRateLimit)
    }
}

/// A JSON body of any content type (Nakama's clients do not all set one); an empty body reads
/// as `{}`, as Nakama's gateway does.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge("Request body too large.".into())
                } else {
                    ApiError::InvalidArgument(format!("Cannot read request body: {rejection}"))
                }
            })?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(bytes)
            .map(ApiJson)
            .map_err(|e| ApiError::InvalidArgument(format!("Malformed JSON body: {e}")))
    }
}

/// A query string, with a clear error naming the bad parameter.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| ApiQuery(value))
            .map_err(|e| ApiError::InvalidArgument(format!("Bad query string: {}", e.body_text())))
    }
}
