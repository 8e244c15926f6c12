//! The rooms API (Muster's own, not Nakama's): create a room of a registered match handler, get
//! its connection info with a join ticket, list, destroy. See [`crate::rooms`].
//!
//! | route | who | answer |
//! |---|---|---|
//! | `POST /v2/rooms` `{"handler","capacity","params"}` | player or admin | 201 room |
//! | `GET /v2/rooms?handler=&limit=&cursor=` | player (limit ≤ 100) or admin (≤ 1000) | `{"rooms":[…], "cursor"}` |
//! | `GET /v2/rooms/{id}` | player or admin | room |
//! | `GET /v2/rooms/{id}/connection` | player | host, port, transport, ticket |
//! | `DELETE /v2/rooms/{id}` | the room's creator, or admin | 204 |
//!
//! A player authenticates with `Authorization: Bearer <session token>`; a game server with
//! `Authorization: Basic base64(<rooms.admin_key>:)` (refused while `rooms.admin_key` is empty).

use axum::extract::{Path, State};
use axum::http::header::HOST;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::auth::RoomsCaller;
use super::error::ApiError;
use super::extract::{ApiJson, ApiQuery};
use super::response::Done;
use crate::net::state::AppState;
use crate::rooms::{CreateRoom, RoomCaller};

/// The domain's view of a rooms caller.
fn room_caller(caller: RoomsCaller) -> RoomCaller {
    match caller {
        RoomsCaller::Player(claims) => RoomCaller::Player {
            user_id: claims.uid,
            username: claims.usn,
        },
        RoomsCaller::Admin => RoomCaller::Admin,
    }
}

pub async fn create(
    State(state): State<AppState>,
    caller: RoomsCaller,
    ApiJson(request): ApiJson<CreateRoom>,
) -> Result<Response, ApiError> {
    let room = state
        .services
        .rooms
        .create_room(&room_caller(caller), request)
        .await?;
    Ok((StatusCode::CREATED, Json(room)).into_response())
}

#[derive(Deserialize)]
pub struct ListQuery {
    handler: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// Most rooms on one page: a player's, and a game server's (admin key).
const MAX_PAGE_PLAYER: usize = 100;
const MAX_PAGE_ADMIN: usize = 1000;

pub async fn list(
    State(state): State<AppState>,
    caller: RoomsCaller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Done {
    let max = match caller {
        RoomsCaller::Player(_) => MAX_PAGE_PLAYER,
        RoomsCaller::Admin => MAX_PAGE_ADMIN,
    };
    let limit = query.limit.unwrap_or(MAX_PAGE_PLAYER);
    if !(1..=max).contains(&limit) {
        return Err(ApiError::InvalidArgument(format!(
            "limit must be between 1 and {max}."
        )));
    }
    let (rooms, cursor) = state.services.rooms.list_rooms(
        query.handler.as_deref(),
        limit,
        query.cursor.as_deref(),
    )?;
    let mut body = serde_json::json!({ "rooms": rooms });
    if let Some(cursor) = cursor {
        body["cursor"] = cursor.into();
    }
    Ok(Json(body))
}

pub async fn get(
    State(state): State<AppState>,
    _: RoomsCaller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let room = state.services.rooms.room_info_anywhere(&id).await?;
    Ok(Json(room).into_response())
}

pub async fn connection(
    State(state): State<AppState>,
    caller: RoomsCaller,
    Path(id): Path<String>,
    parts: axum::http::HeaderMap,
) -> Result<Response, ApiError> {
    let host_header = parts
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    let (host, port) = split_host(host_header);
    let info = state
        .services
        .rooms
        .connection_anywhere(&room_caller(caller), &id, host, port)
        .await?;
    Ok(Json(info).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TicketBody {
    ticket: String,
}

/// `POST /v2/rooms/{id}/tickets/verify {"ticket"}` (rooms.admin_key): who holds the ticket, once.
pub async fn verify_ticket(
    State(state): State<AppState>,
    caller: RoomsCaller,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TicketBody>,
) -> Done {
    let claims = state
        .services
        .rooms
        .redeem_ticket(&room_caller(caller), &id, &body.ticket)?;
    Ok(Json(serde_json::json!({
        "user_id": claims.uid.to_string(),
        "username": claims.usn,
        "room_id": id,
    })))
}

pub async fn destroy(
    State(state): State<AppState>,
    caller: RoomsCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .services
        .rooms
        .destroy_room_anywhere(&room_caller(caller), &id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `host[:port]` or `[v6]:port` → (host, port); port 80 when absent.
fn split_host(value: &str) -> (&str, u16) {
    if let Some(rest) = value.strip_prefix('[') {
        if let Some((host, tail)) = rest.split_once(']') {
            let port = tail
                .strip_prefix(':')
                .and_then(|p| p.parse().ok())
                .unwrap_or(80);
            return (host, port);
        }
    }
    match value.rsplit_once(':') {
        Some((host, port)) => (host, port.parse().unwrap_or(80)),
        None => (value, 80),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_header_forms() {
        assert_eq!(super::split_host("example.com"), ("example.com", 80));
        assert_eq!(super::split_host("127.0.0.1:7350"), ("127.0.0.1", 7350));
        assert_eq!(super::split_host("[::1]:9"), ("::1", 9));
    }
}
