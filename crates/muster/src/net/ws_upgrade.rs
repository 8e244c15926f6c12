//! The realtime socket's front door: `GET /ws`.
//!
//! `GET /ws?token=...&format=json|protobuf` is checked (rate limit, token, format, socket cap)
//! before the upgrade, so a bad request is answered 4xx with Nakama's error body and never becomes
//! a socket. After the upgrade, [`super::ws::serve`] owns the connection.
//!
//! The handshake is tungstenite's (it checks the request and makes the `101` answer), and the
//! socket gets the connection's TCP stream itself from hyper, not a wrapper around it: its
//! writing side is shared with the senders of its messages ([`super::link`]).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio::net::TcpStream;

use super::connection::{self, NotAdmitted};
use super::http::auth;
use super::http::error::ApiError;
use super::http::extract::{ApiQuery, ClientIp};
use crate::net::state::AppState;
use crate::session::Format;

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
    request: Request,
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
    let (mut head, _body) = request.into_parts();
    let on_upgrade = head.extensions.remove::<OnUpgrade>();
    let head = axum::http::Request::from_parts(head, ());
    let answer = tungstenite::handshake::server::create_response(&head).map_err(|error| {
        ApiError::InvalidArgument(format!("Not a WebSocket upgrade request: {error}"))
    })?;
    let on_upgrade = on_upgrade.ok_or_else(|| {
        ApiError::InvalidArgument(
            "Not a WebSocket upgrade request: the connection cannot be upgraded".into(),
        )
    })?;
    let accepted = Box::new(super::ws::Upgrade {
        claims,
        format,
        appear_online,
        admission,
        state,
    });
    // The socket's task: it waits for hyper to hand the connection over once the answer is
    // written (a client that goes away first ends it, its places released with `accepted`).
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(%error, "WebSocket upgrade failed");
                return;
            }
        };
        match upgraded.downcast::<TokioIo<TcpStream>>() {
            // Copied, and let go of before the socket's life begins: the rest of hyper's read
            // buffer shares its allocation (kilobytes), which would live as long as the socket.
            Ok(parts) => {
                let read = parts.read_buf.to_vec();
                drop(parts.read_buf);
                super::ws::serve(parts.io.into_inner(), read, accepted).await
            }
            // Every listener serves plain TCP streams through hyper-util's `TokioIo`.
            Err(_) => tracing::warn!("WebSocket upgrade on a connection that is not TCP"),
        }
    });
    let (answer, ()) = answer.into_parts();
    let response = Response::from_parts(answer, Body::empty());
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
