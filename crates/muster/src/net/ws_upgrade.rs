//! The realtime socket's front door: `GET /ws`.
//!
//! `GET /ws?token=...&format=json|protobuf` is checked (rate limit, token, format, socket cap)
//! before the upgrade, so a bad request is answered 4xx with Nakama's error body and never becomes
//! a socket. After the upgrade, [`super::ws::serve`] owns the connection.

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::connection::{self, NotAdmitted};
use super::http::auth;
use super::http::error::ApiError;
use super::http::extract::{ApiQuery, ClientIp};
use crate::net::state::AppState;
use crate::session::Format;

/// Bytes of frames a socket gathers before writing them without waiting for its flush.
const WRITE_BATCH_BYTES: usize = 64 * 1024;

#[derive(Deserialize)]
pub struct ConnectQuery {
    token: Option<String>,
    format: Option<String>,
    /// `true`: the socket appears online to its user's followers at once (Nakama's).
    status: Option<String>,
}

pub async fn upgrade(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    ApiQuery(query): ApiQuery<ConnectQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    connection::allow_connect(&state, ip).map_err(refused)?;
    let token = query
        .token
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::Unauthenticated("Auth token required.".into()))?;
    let claims = auth::verify_session(&state, &token)?;
    let format = match query.format.as_deref() {
        None | Some("") | Some("json") => Format::Json,
        Some("protobuf") => Format::Protobuf,
        Some(other) => {
            return Err(ApiError::InvalidArgument(format!(
                "Unknown format '{other}': use json or protobuf."
            )))
        }
    };
    let appear_online = match query.status.as_deref() {
        None | Some("") | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::InvalidArgument(format!(
                "Unknown status '{other}': use true or false."
            )))
        }
    };
    let mut admission = connection::take_place(&state, ip).map_err(refused)?;
    connection::take_user_place(&state, &mut admission, claims.uid).map_err(refused)?;
    let upgrade = upgrade.map_err(|rejection| {
        ApiError::InvalidArgument(format!(
            "Not a WebSocket upgrade request: {}",
            rejection.body_text()
        ))
    })?;
    let socket_config = &state.config.socket;
    let upgrade = upgrade
        .read_buffer_size(socket_config.read_buffer_bytes)
        // Frames queue in tungstenite's write buffer until the socket task flushes, so a
        // request's answer and everything its outbox holds leave in one write (one syscall
        // instead of one per frame). The buffer holds only what one flush carries; an idle
        // socket's stays as small as its largest batch.
        .write_buffer_size(WRITE_BATCH_BYTES)
        .max_write_buffer_size(socket_config.max_message_size_bytes.max(64 * 1024) * 4)
        .max_message_size(socket_config.max_message_size_bytes)
        .max_frame_size(socket_config.max_message_size_bytes);
    let accepted = Box::new(super::ws::Upgrade {
        claims,
        format,
        appear_online,
        admission,
        state,
    });
    let response = upgrade
        .on_upgrade(move |ws| super::ws::serve(ws, accepted))
        .into_response();
    Ok(response)
}

/// A refused connection as the HTTP answer to its upgrade request: 429 or 503.
fn refused(refusal: NotAdmitted) -> ApiError {
    let message = refusal.message().to_owned();
    match refusal {
        NotAdmitted::RateLimited | NotAdmitted::TooManyFromIp | NotAdmitted::TooManyForUser => {
            ApiError::TooManyRequests(message)
        }
        NotAdmitted::Full => ApiError::Unavailable(message),
    }
}
