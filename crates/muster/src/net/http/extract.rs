//! Request extractors that turn every kind of bad input into a clear [`ApiError`]: JSON bodies
//! and query strings, the client IP, the authentication rate limit. Credentials are
//! [`super::auth`]'s.

use std::net::{IpAddr, SocketAddr};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::base::ratelimit::IpLimit;
use crate::net::state::AppState;

/// The client's address as per-IP limits count it: the TCP peer's, or the one a trusted proxy
/// forwarded (`limits.trusted_proxies`), IPv6 by its /64 (see [`crate::base::client_ip`]).
pub struct ClientIp(pub IpAddr);

impl FromRequestParts<AppState> for ClientIp {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip())
            .ok_or(ApiError::Internal)?;
        let forwarded = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok());
        Ok(ClientIp(state.trusted_proxies.client(peer, forwarded)))
    }
}

/// An extractor that refuses a request whose client IP is over one of the edge's rate limits
/// (429, counted in `muster_rate_limited_total{kind}`).
macro_rules! rate_limit {
    ($(#[$doc:meta])* $name:ident, $limit:ident, $label:literal, $message:literal) => {
        $(#[$doc])*
        pub struct $name;

        impl FromRequestParts<AppState> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
                within(parts, state, &state.$limit, $label, $message).await?;
                Ok($name)
            }
        }
    };
}

rate_limit!(
    /// Refuses the call when the client IP is over its authentication rate.
    AuthRateLimit,
    auth_limit,
    "auth",
    "Too many authentication requests; slow down."
);

rate_limit!(
    /// Refuses the query when the client IP is over `gateway.requests_per_ip_per_sec`.
    GatewayRateLimit,
    gateway_limit,
    "graphql",
    "Too many requests; slow down."
);

/// Ok when the client IP is within `limit`; else 429 with `message`, counted under `label`.
async fn within(
    parts: &mut Parts,
    state: &AppState,
    limit: &IpLimit,
    label: &str,
    message: &str,
) -> Result<(), ApiError> {
    let ClientIp(ip) = ClientIp::from_request_parts(parts, state).await?;
    if limit.allow(ip) {
        return Ok(());
    }
    state
        .services
        .metrics
        .rate_limited
        .with_label_values(&[label])
        .inc();
    Err(ApiError::TooManyRequests(message.into()))
}

/// A JSON body of any content type (Nakama's clients do not all set one); an empty body reads
/// as `{}`, as Nakama's gateway does.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_error)?;
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

/// Why a request body could not be read, as the client is told: too large (413), too slow
/// (`limits.body_read_timeout_ms`: 408), or broken off (400).
pub fn body_error(rejection: BytesRejection) -> ApiError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::PayloadTooLarge("Request body too large.".into());
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&rejection);
    while let Some(error) = cause {
        if error.is::<tower_http::timeout::TimeoutError>() {
            return ApiError::RequestTimeout("Request body not received in time.".into());
        }
        cause = error.source();
    }
    ApiError::InvalidArgument(format!("Cannot read request body: {rejection}"))
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

/// The users a query string names, as Nakama's gateway reads the repeated fields `ids` and
/// `usernames`; other parameters are left to the caller.
#[derive(Debug, Default)]
pub struct UserRefs {
    pub ids: Vec<String>,
    pub usernames: Vec<String>,
}

impl UserRefs {
    pub fn from_query(raw: Option<&str>) -> UserRefs {
        let mut refs = UserRefs::default();
        for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
            match name.as_ref() {
                "ids" => refs.ids.push(value.into_owned()),
                "usernames" => refs.usernames.push(value.into_owned()),
                _ => {}
            }
        }
        refs
    }
}

/// Every value of the repeated query parameter `name`.
pub fn repeated(raw: Option<&str>, name: &str) -> Vec<String> {
    form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
        .filter(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
        .collect()
}

/// A query parameter parsed as `T` (a number, a boolean), or `InvalidArgument` with `message`
/// (Nakama's wording for it).
pub fn parsed<T: std::str::FromStr>(value: &str, message: &str) -> Result<T, ApiError> {
    value
        .parse()
        .map_err(|_| ApiError::InvalidArgument(message.into()))
}
