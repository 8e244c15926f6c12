//! Matches and rooms: the cluster's matches with their labels and sizes, this node's rooms, a
//! match's presences and (authoritative) state, a signal to it and a player kicked from it — each
//! on whichever node the match lives on.

use axum::extract::Path;
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::auth::{console, As, Developer, Readonly};
use super::error::domain;
use super::{Answer, ConsoleApiError};
use crate::matches::listing::ListAsk;

/// Matches listed at most.
const LIMIT: usize = 100;

/// `GET /api/matches`: up to 100 matches of the cluster, and this node's rooms.
pub async fn list(As { state, .. }: As<Readonly>) -> Answer {
    let matches = state
        .services
        .matches
        .list_matches(&ListAsk {
            limit: LIMIT,
            ..ListAsk::default()
        })
        .await
        .map_err(ConsoleApiError::BadRequest)?;
    let (rooms, _) = state
        .services
        .rooms
        .list_rooms(None, LIMIT, None)
        .map_err(domain)?;
    Ok(Json(json!({"matches": matches, "rooms": rooms})))
}

/// `GET /api/rooms/{id}/log`: the game server's latest output, for a room of this node's fleet.
pub async fn room_log(As { state, .. }: As<Readonly>, Path(id): Path<String>) -> Answer {
    let output = state
        .services
        .rooms
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
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
    Json(body): Json<SignalBody>,
) -> Answer {
    let answer = state
        .services
        .matches
        .signal_anywhere(&id, body.data.clone())
        .await
        .map_err(domain)?;
    console(&state)?
        .audit(&operator, "match_signal", &id, json!({"data": body.data}))
        .await?;
    Ok(Json(json!({ "data": answer })))
}

/// A state shown at most this long (the rest is cut, and the answer says so).
const STATE_SHOWN: usize = 256 * 1024;

/// `GET /api/matches/{id}`: who is in the match and, for an authoritative one, its state.
pub async fn inspect(As { state, .. }: As<Readonly>, Path(id): Path<String>) -> Answer {
    let mut inspection = state
        .services
        .matches
        .inspect_anywhere(&id)
        .await
        .map_err(domain)?;
    let mut cut = false;
    if let Some(text) = inspection.state.as_mut() {
        if text.len() > STATE_SHOWN {
            let mut end = STATE_SHOWN;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            cut = true;
        }
    }
    let mut answer = serde_json::to_value(&inspection).unwrap_or_default();
    answer["state_cut"] = cut.into();
    Ok(Json(answer))
}

#[derive(Deserialize)]
pub struct KickBody {
    session_id: String,
}

/// `POST /api/matches/{id}/kick`: removes the player of `session_id` from the match (the others
/// are told it left); 404 when it is not in the match.
pub async fn kick(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
    Json(body): Json<KickBody>,
) -> Answer {
    let session = Uuid::parse_str(&body.session_id)
        .map_err(|_| ConsoleApiError::BadRequest("Not a session id.".into()))?;
    if !state
        .services
        .matches
        .kick_anywhere(&id, session)
        .await
        .map_err(domain)?
    {
        return Err(ConsoleApiError::NotFound);
    }
    console(&state)?
        .audit(&operator, "match_kick", &id, json!({"session_id": session}))
        .await?;
    Ok(Json(json!({})))
}
