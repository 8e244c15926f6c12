//! Matches and rooms: the cluster's matches with their labels and sizes, this node's rooms, and
//! a signal to an authoritative match (on the node it lives on).

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::{console, Session};
use super::error::domain;
use super::ConsoleApiError;
use crate::console::Role;
use crate::matches::listing::ListAsk;
use crate::net::state::AppState;

/// Matches listed at most.
const LIMIT: usize = 100;

/// `GET /api/matches`: up to 100 matches of the cluster, and this node's rooms.
pub async fn list(
    State(state): State<AppState>,
    Session(operator): Session,
) -> Result<Json<Value>, ConsoleApiError> {
    operator.require(Role::Readonly)?;
    let matches = state
        .matches
        .list_matches(&ListAsk {
            limit: LIMIT,
            ..ListAsk::default()
        })
        .await
        .map_err(ConsoleApiError::BadRequest)?;
    let (rooms, _) = state
        .matches
        .list_rooms(None, LIMIT, None)
        .map_err(domain)?;
    Ok(Json(json!({"matches": matches, "rooms": rooms})))
}

/// `GET /api/rooms/{id}/log`: the game server's latest output, for a room of this node's fleet.
pub async fn room_log(
    State(state): State<AppState>,
    Session(operator): Session,
    Path(id): Path<String>,
) -> Result<Json<Value>, ConsoleApiError> {
    operator.require(Role::Readonly)?;
    let output = state
        .matches
        .room_output(&id)
        .map_err(domain)?
        .ok_or(ConsoleApiError::NotFound)?;
    Ok(Json(json!({ "output": output })))
}

#[derive(Deserialize)]
pub struct SignalBody {
    #[serde(default)]
    data: String,
}

/// `POST /api/matches/{id}/signal`: the handler's answer (Nakama's `matchSignal`).
pub async fn signal(
    State(state): State<AppState>,
    Session(operator): Session,
    Path(id): Path<String>,
    Json(body): Json<SignalBody>,
) -> Result<Json<Value>, ConsoleApiError> {
    operator.require(Role::Developer)?;
    let answer = state
        .matches
        .signal(&id, body.data.clone())
        .await
        .map_err(domain)?;
    console(&state)?
        .audit(&operator, "match_signal", &id, json!({"data": body.data}))
        .await?;
    Ok(Json(json!({ "data": answer })))
}
