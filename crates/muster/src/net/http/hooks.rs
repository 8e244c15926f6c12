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
use crate::net::state::AppState;

/// Largest answer an after hook is shown.
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Where a request's body sits in the request Nakama's hooks see.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BodyShape {
    /// No body: the hooks see the path and query parameters.
    None,
    /// The body is the request.
    Whole,
    /// The body is the request's `account`, beside the query's `create` and `username`
    /// (Nakama's `Authenticate…Request`).
    Account,
    /// The body is the request's `record`, beside the path's `id` (Nakama's
    /// `Write…RecordRequest`, `leaderboardId` or `tournamentId`).
    Record(&'static str),
}

/// Nakama's name of the call a route and method serve, and where its body sits.
fn hook_of(method: &Method, route: &str) -> Option<(&'static str, BodyShape)> {
    let get = method == Method::GET;
    let post = method == Method::POST;
    let put = method == Method::PUT;
    let delete = method == Method::DELETE;
    Some(match route {
        "/v2/account/authenticate/device" if post => ("AuthenticateDevice", BodyShape::Account),
        "/v2/account/authenticate/email" if post => ("AuthenticateEmail", BodyShape::Account),
        "/v2/account/authenticate/custom" if post => ("AuthenticateCustom", BodyShape::Account),
        "/v2/account/session/refresh" if post => ("SessionRefresh", BodyShape::Whole),
        "/v2/session/logout" if post => ("SessionLogout", BodyShape::Whole),
        "/v2/account" if get => ("GetAccount", BodyShape::None),
        "/v2/account" if put => ("UpdateAccount", BodyShape::Whole),
        "/v2/account" if delete => ("DeleteAccount", BodyShape::None),
        "/v2/account/link/device" if post => ("LinkDevice", BodyShape::Whole),
        "/v2/account/link/custom" if post => ("LinkCustom", BodyShape::Whole),
        "/v2/account/link/email" if post => ("LinkEmail", BodyShape::Whole),
        "/v2/account/unlink/device" if post => ("UnlinkDevice", BodyShape::Whole),
        "/v2/account/unlink/custom" if post => ("UnlinkCustom", BodyShape::Whole),
        "/v2/account/unlink/email" if post => ("UnlinkEmail", BodyShape::Whole),
        "/v2/user" if get => ("GetUsers", BodyShape::None),
        "/v2/friend" if get => ("ListFriends", BodyShape::None),
        "/v2/friend" if post => ("AddFriends", BodyShape::None),
        "/v2/friend" if delete => ("DeleteFriends", BodyShape::None),
        "/v2/friend/block" if post => ("BlockFriends", BodyShape::None),
        "/v2/friend/friends" if get => ("ListFriendsOfFriends", BodyShape::None),
        "/v2/group" if get => ("ListGroups", BodyShape::None),
        "/v2/group" if post => ("CreateGroup", BodyShape::Whole),
        "/v2/group/{group_id}" if put => ("UpdateGroup", BodyShape::Whole),
        "/v2/group/{group_id}" if delete => ("DeleteGroup", BodyShape::None),
        "/v2/group/{group_id}/join" if post => ("JoinGroup", BodyShape::None),
        "/v2/group/{group_id}/leave" if post => ("LeaveGroup", BodyShape::None),
        "/v2/group/{group_id}/add" if post => ("AddGroupUsers", BodyShape::None),
        "/v2/group/{group_id}/kick" if post => ("KickGroupUsers", BodyShape::None),
        "/v2/group/{group_id}/ban" if post => ("BanGroupUsers", BodyShape::None),
        "/v2/group/{group_id}/promote" if post => ("PromoteGroupUsers", BodyShape::None),
        "/v2/group/{group_id}/demote" if post => ("DemoteGroupUsers", BodyShape::None),
        "/v2/group/{group_id}/user" if get => ("ListGroupUsers", BodyShape::None),
        "/v2/user/{user_id}/group" if get => ("ListUserGroups", BodyShape::None),
        "/v2/match" if get => ("ListMatches", BodyShape::None),
        "/v2/notification" if get => ("ListNotifications", BodyShape::None),
        "/v2/notification" if delete => ("DeleteNotifications", BodyShape::None),
        "/v2/channel/{channel_id}" if get => ("ListChannelMessages", BodyShape::None),
        "/v2/storage" if put => ("WriteStorageObjects", BodyShape::Whole),
        "/v2/storage" if post => ("ReadStorageObjects", BodyShape::Whole),
        "/v2/storage/delete" if put => ("DeleteStorageObjects", BodyShape::Whole),
        "/v2/storage/{collection}" | "/v2/storage/{collection}/{user_id}" if get => {
            ("ListStorageObjects", BodyShape::None)
        }
        "/v2/leaderboard/{id}" if get => ("ListLeaderboardRecords", BodyShape::None),
        "/v2/leaderboard/{id}" if post => (
            "WriteLeaderboardRecord",
            BodyShape::Record("leaderboard_id"),
        ),
        "/v2/leaderboard/{id}" if delete => ("DeleteLeaderboardRecord", BodyShape::None),
        "/v2/leaderboard/{id}/owner/{owner_id}" if get => {
            ("ListLeaderboardRecordsAroundOwner", BodyShape::None)
        }
        "/v2/tournament" if get => ("ListTournaments", BodyShape::None),
        "/v2/tournament/{id}" if get => ("ListTournamentRecords", BodyShape::None),
        "/v2/tournament/{id}" if put || post => {
            ("WriteTournamentRecord", BodyShape::Record("tournament_id"))
        }
        "/v2/tournament/{id}/join" if post => ("JoinTournament", BodyShape::None),
        "/v2/tournament/{id}/owner/{owner_id}" if get => {
            ("ListTournamentRecordsAroundOwner", BodyShape::None)
        }
        _ => return None,
    })
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
    let Some((name, shape)) = route
        .as_deref()
        .and_then(|route| hook_of(request.method(), route))
    else {
        return next.run(request).await;
    };
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
    let data = if shape == BodyShape::None {
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
            BodyShape::Account => json!({
                "account": body,
                "create": params.get("create").map(|c| c != "false").unwrap_or(true),
                "username": params.get("username").cloned().unwrap_or(json!("")),
            }),
            BodyShape::Record(id) => {
                json!({ id: params.get("id").cloned().unwrap_or_default(), "record": body })
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
                    BodyShape::None => None,
                    BodyShape::Whole => Some(&changed),
                    BodyShape::Account => changed.get("account"),
                    BodyShape::Record(_) => changed.get("record"),
                };
                if let Some(body) = body {
                    bytes = serde_json::to_vec(body).unwrap_or_default().into();
                    parts.headers.remove(header::CONTENT_LENGTH);
                }
                if shape != BodyShape::None {
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
