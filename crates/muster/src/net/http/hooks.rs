//! A module's before and after hooks around Nakama's REST calls (`registerBeforeWriteStorageObjects`,
//! …), as Nakama runs them: the before hook gets the request (camelCase keys) and answers the
//! request to go on with — for a call with a body, what it answers replaces the body; for a
//! call without one (a GET, a DELETE), it may only let the call through or refuse it. Answering
//! nothing refuses the call (404, "Requested resource was not found."), a throw refuses it with
//! the thrown code. After hooks get the answer and the request once the answer is ready, and
//! change nothing.

use std::collections::HashMap;

use axum::body::{to_bytes, Body};
use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use muster_js::Hook;
use serde_json::{json, Map, Value};

use super::auth::verify_session;
use super::error::ApiError;
use super::extract::ClientIp;
use crate::functions::{CallError, RpcError};
use crate::net::calls::{self, Body as CallBody, Call};
use crate::net::state::AppState;

/// Largest answer an after hook is shown.
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// The call a route serves, when a module may hook it (Nakama has no hooks for RPCs and the
/// health check).
fn hooked_call(method: &Method, route: &str) -> Option<&'static Call> {
    calls::by_route(method, route).filter(|call| !matches!(call.name, "RpcFunc" | "Healthcheck"))
}

/// Runs the hooks of the call `request` is, when the module has any.
pub async fn run(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(module) = state.module.clone() else {
        return next.run(request).await;
    };
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned());
    let Some(call) = route
        .as_deref()
        .and_then(|route| hooked_call(request.method(), route))
    else {
        return next.run(request).await;
    };
    let (name, shape) = (call.name, call.body);
    let (before, after) = (
        module.has_hook(Hook::Before, name),
        module.has_hook(Hook::After, name),
    );
    if !before && !after {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let limit = state.services.config.limits.max_request_size_bytes;
    let Ok(bytes) = to_bytes(body, limit).await else {
        return ApiError::InvalidArgument("Request body is too large or unreadable.".into())
            .into_response();
    };
    // What the hooks see of the request: its body, or its path and query parameters.
    let params = parameters(route.as_deref().unwrap_or_default(), &parts.uri);
    let data = if shape == CallBody::None {
        params
    } else {
        let body = match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => value,
            // Not JSON: the handler answers with its own error.
            Err(_) => {
                return next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await
            }
        };
        match shape {
            // Nakama's `Authenticate…Request`: `create` is a boolean, true unless "false".
            CallBody::Field("account") => json!({
                "account": body,
                "create": params.get("create").map(|c| c != "false").unwrap_or(true),
                "username": params.get("username").cloned().unwrap_or(json!("")),
            }),
            CallBody::Field(field) => {
                let mut request = params;
                request[field] = body;
                request
            }
            _ => body,
        }
    };
    let mut context = json!({ "executionMode": "before" });
    if let Some(token) = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        if let Ok(claims) = verify_session(&state, token) {
            context["userId"] = json!(claims.uid.to_string());
            context["username"] = json!(claims.usn);
            context["vars"] = json!(claims.vrs);
            context["userSessionExp"] = json!(claims.exp);
        }
    }
    if let Ok(ClientIp(ip)) = ClientIp::from_request_parts(&mut parts, &state).await {
        context["clientIp"] = json!(ip.to_string());
    }
    let mut bytes = bytes;
    let mut data = data;
    if before {
        match module
            .call_hook(Hook::Before, name, context.clone(), &data, None)
            .await
        {
            Ok(Some(changed)) => {
                let body = match shape {
                    CallBody::None => None,
                    CallBody::Whole => Some(&changed),
                    CallBody::Field(field) => changed.get(field),
                };
                if let Some(body) = body {
                    bytes = serde_json::to_vec(body).unwrap_or_default().into();
                    parts.headers.remove(header::CONTENT_LENGTH);
                }
                if shape != CallBody::None {
                    data = changed;
                }
            }
            Ok(None) => {
                return ApiError::NotFound("Requested resource was not found.".into())
                    .into_response()
            }
            Err(error) => {
                let refusal = RpcError::new(crate::runtime::js::code_of(error.code), error.message);
                return ApiError::from(CallError::Failed(refusal)).into_response();
            }
        }
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if !after || !response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(answer) = to_bytes(body, MAX_ANSWER_BYTES).await else {
        return (parts.status, "").into_response();
    };
    let output: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
    context["executionMode"] = json!("after");
    tokio::spawn(async move {
        if let Err(error) = module
            .call_hook(Hook::After, name, context, &output, Some(&data))
            .await
        {
            tracing::debug!(hook = name, message = %error.message, "an after hook failed");
        }
    });
    Response::from_parts(parts, Body::from(answer))
}

/// A bodiless call's parameters: its path's (by the route's names) and its query's.
fn parameters(route: &str, uri: &axum::http::Uri) -> Value {
    let mut out = Map::new();
    for (pattern, actual) in route.split('/').zip(uri.path().split('/')) {
        if let Some(name) = pattern.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            let value = percent_encoding::percent_decode_str(actual).decode_utf8_lossy();
            out.insert(name.to_owned(), json!(value));
        }
    }
    let mut query: HashMap<String, Vec<String>> = HashMap::new();
    for (name, value) in form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
        query
            .entry(name.into_owned())
            .or_default()
            .push(value.into_owned());
    }
    for (name, mut values) in query {
        let value = if values.len() == 1 {
            json!(values.pop())
        } else {
            json!(values)
        };
        out.entry(name).or_insert(value);
    }
    Value::Object(out)
}
