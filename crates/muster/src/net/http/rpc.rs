//! `POST /v2/rpc/{id}` and `GET /v2/rpc/{id}`: server functions over HTTP, as Nakama serves them.
//!
//! Authentication: `?http_key=KEY` or HTTP Basic with the key as user name (server-to-server:
//! the function runs with no caller and may act for any account), else a session token
//! (`Authorization: Bearer`). The payload: a POST body holding the payload as a JSON *string*
//! (`"{\"amount\":10}"`, what Nakama's gRPC gateway and clients send), or with `?unwrap` the raw
//! body; a GET takes it from `?payload=`. The answer: `{"payload": "<result>"}`, or with
//! `?unwrap` the raw result. Errors use Nakama's body `{"error","message","code"}`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use serde::Deserialize;

use super::error::ApiError;
use super::extract::{constant_time_eq, ApiQuery};
use crate::functions::CallError;
use crate::functions::Caller;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct RpcQuery {
    http_key: Option<String>,
    /// Present (with any value, even none): raw payload in, raw result out.
    unwrap: Option<String>,
    /// The payload of a GET call.
    payload: Option<String>,
}

/// Who is calling: a user (session token) or a server (HTTP key).
fn authenticate(
    state: &AppState,
    query: &RpcQuery,
    headers: &HeaderMap,
) -> Result<Option<Caller>, ApiError> {
    let key_matches = |key: &[u8]| constant_time_eq(key, state.config.runtime.http_key.as_bytes());
    let invalid_key = || ApiError::Unauthenticated("HTTP key invalid.".into());
    if let Some(key) = query.http_key.as_deref().filter(|k| !k.is_empty()) {
        return if key_matches(key.as_bytes()) {
            Ok(None)
        } else {
            Err(invalid_key())
        };
    }
    let Some(value) = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return Err(ApiError::Unauthenticated(
            "Auth token or HTTP key required.".into(),
        ));
    };
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if scheme.eq_ignore_ascii_case("Basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .map_err(|_| invalid_key())?;
        let key = decoded.split(|&b| b == b':').next().unwrap_or_default();
        return if key_matches(key) {
            Ok(None)
        } else {
            Err(invalid_key())
        };
    }
    if !scheme.eq_ignore_ascii_case("Bearer") {
        return Err(ApiError::Unauthenticated(
            "Auth token or HTTP key required.".into(),
        ));
    }
    let claims = state
        .tokens
        .verify_session(rest.trim())
        .map_err(|e| ApiError::Unauthenticated(e.to_string()))?;
    Ok(Some(Caller {
        user_id: claims.uid,
        username: claims.usn,
    }))
}

pub async fn call(
    State(state): State<AppState>,
    method: Method,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<RpcQuery>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let caller = authenticate(&state, &query, &headers)?;
    let unwrap = query.unwrap.is_some();
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge("Request body too large.".into())
        } else {
            ApiError::InvalidArgument(format!("Cannot read request body: {rejection}"))
        }
    })?;
    let payload = if method == Method::POST {
        if unwrap || body.is_empty() {
            String::from_utf8(body.to_vec())
                .map_err(|_| ApiError::InvalidArgument("Payload must be UTF-8 text.".into()))?
        } else {
            serde_json::from_slice::<String>(&body).map_err(|_| {
                ApiError::InvalidArgument(
                    "Request body must be the payload as a JSON string, e.g. \"{\\\"amount\\\":10}\" (or send it raw with ?unwrap).".into(),
                )
            })?
        }
    } else {
        query.payload.clone().unwrap_or_default()
    };
    let result = state
        .rpc
        .call(&id, caller.as_ref(), &payload)
        .await
        .map_err(|error| match error {
            CallError::MissingId => ApiError::InvalidArgument("RPC ID must be set.".into()),
            CallError::NotFound => ApiError::NotFound("RPC function not found.".into()),
            CallError::Failed(error) => error.into(),
        })?;
    if unwrap {
        let content_type = headers
            .get(CONTENT_TYPE)
            .cloned()
            .unwrap_or(HeaderValue::from_static("text/plain"));
        return Ok(([(CONTENT_TYPE, content_type)], result).into_response());
    }
    Ok(Json(serde_json::json!({ "payload": result })).into_response())
}
