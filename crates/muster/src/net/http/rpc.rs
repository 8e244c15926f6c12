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
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::auth::RpcCaller;
use super::error::ApiError;
use super::extract::{body_error, ApiQuery};
use crate::functions::Caller;
use crate::net::state::AppState;

#[derive(Deserialize)]
pub struct RpcQuery {
    /// Present (with any value, even none): raw payload in, raw result out.
    unwrap: Option<String>,
    /// The payload of a GET call.
    payload: Option<String>,
}

pub async fn call(
    State(state): State<AppState>,
    method: Method,
    Path(id): Path<String>,
    caller: RpcCaller,
    ApiQuery(query): ApiQuery<RpcQuery>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let caller = match caller {
        RpcCaller::Player(claims) => Some(Caller {
            user_id: claims.uid,
            username: claims.usn,
        }),
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
    let result = state.rpc.call(&id, caller.as_ref(), &payload).await?;
    if unwrap {
        let content_type = headers
            .get(CONTENT_TYPE)
            .cloned()
            .unwrap_or(HeaderValue::from_static("text/plain"));
        return Ok(([(CONTENT_TYPE, content_type)], result).into_response());
    }
    Ok(Json(serde_json::json!({ "payload": result })).into_response())
}
