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
use std::collections::HashMap;

use axum::extract::{Path, RawQuery, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::auth::RpcCaller;
use super::error::ApiError;
use super::extract::ClientIp;
use super::extract::{body_error, ApiQuery};
use crate::functions::{Caller, RequestContext};
use crate::net::state::AppState;

#[derive(Deserialize)]
pub struct RpcQuery {
    /// Present (with any value, even none): raw payload in, raw result out.
    unwrap: Option<String>,
    /// The payload of a GET call.
    payload: Option<String>,
}

// One extractor per part of the request axum hands over.
#[allow(clippy::too_many_arguments)]
pub async fn call(
    State(state): State<AppState>,
    method: Method,
    Path(id): Path<String>,
    caller: RpcCaller,
    ApiQuery(query): ApiQuery<RpcQuery>,
    RawQuery(raw_query): RawQuery,
    ClientIp(client_ip): ClientIp,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let mut request = RequestContext {
        client_ip: client_ip.to_string(),
        query_params: query_params(raw_query.as_deref()),
        headers: headers_of(&headers),
        ..RequestContext::default()
    };
    let caller = match caller {
        RpcCaller::Player(claims) => {
            request.session_id = Some(claims.tid);
            request.session_expires = claims.exp;
            request.vars = claims.vrs;
            Some(Caller {
                user_id: claims.uid,
                username: claims.usn,
            })
        }
        RpcCaller::Server => None,
    };
    let unwrap = query.unwrap.is_some();
    let body = body.map_err(body_error)?;
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
        .call(&id, caller.as_ref(), &payload, Some(&request))
        .await?;
    if unwrap {
        let content_type = headers
            .get(CONTENT_TYPE)
            .cloned()
            .unwrap_or(HeaderValue::from_static("text/plain"));
        return Ok(([(CONTENT_TYPE, content_type)], result).into_response());
    }
    Ok(Json(serde_json::json!({ "payload": result })).into_response())
}

/// Query parameters by name, each with its values (the credentials left out).
fn query_params(raw: Option<&str>) -> HashMap<String, Vec<String>> {
    let mut params: HashMap<String, Vec<String>> = HashMap::new();
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        if name != "http_key" {
            params
                .entry(name.into_owned())
                .or_default()
                .push(value.into_owned());
        }
    }
    params
}

/// Headers by name, each with its values; credentials (authorization, cookies) left out.
fn headers_of(headers: &HeaderMap) -> HashMap<String, Vec<String>> {
    let mut found: HashMap<String, Vec<String>> = HashMap::new();
    for (name, value) in headers {
        if matches!(
            name.as_str(),
            "authorization" | "cookie" | "proxy-authorization"
        ) {
            continue;
        }
        if let Ok(value) = value.to_str() {
            found
                .entry(name.as_str().to_owned())
                .or_default()
                .push(value.to_owned());
        }
    }
    found
}
