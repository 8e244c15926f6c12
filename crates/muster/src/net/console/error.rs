//! The console API's one error type: every refusal is `{"error": code, "message": text}` with
//! its HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::console::ConsoleError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleApiError {
    #[error(transparent)]
    Console(#[from] ConsoleError),
    #[error("Too many requests; slow down.")]
    TooManyRequests,
    #[error("Not found.")]
    NotFound,
    #[error("{0}")]
    BadRequest(String),
    /// A change refused because what it changes moved on (a stale version).
    #[error("{0}")]
    Conflict(String),
    /// A domain's refusal, as the game API would give it (its status and message).
    #[error("{0}")]
    Domain(crate::net::http::error::ApiError),
    #[error("The console is off on this node.")]
    Off,
    #[error("internal error")]
    Internal,
}

impl From<StoreError> for ConsoleApiError {
    fn from(error: StoreError) -> Self {
        ConsoleApiError::Console(error.into())
    }
}

/// A domain's error as a console answer (`.map_err(domain)`).
pub fn domain<E: Into<crate::net::http::error::ApiError>>(error: E) -> ConsoleApiError {
    ConsoleApiError::Domain(error.into())
}

impl ConsoleApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            ConsoleApiError::Domain(e) => match e.status_and_code().0 {
                StatusCode::BAD_REQUEST => (StatusCode::BAD_REQUEST, "invalid"),
                StatusCode::NOT_FOUND => (StatusCode::NOT_FOUND, "not_found"),
                StatusCode::CONFLICT => (StatusCode::CONFLICT, "conflict"),
                StatusCode::FORBIDDEN => (StatusCode::FORBIDDEN, "forbidden"),
                StatusCode::SERVICE_UNAVAILABLE => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
                StatusCode::TOO_MANY_REQUESTS => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
                status if status.is_client_error() => (status, "invalid"),
                status => (status, "internal"),
            },
            ConsoleApiError::Console(e) => match e {
                ConsoleError::BadLogin => (StatusCode::UNAUTHORIZED, "bad_login"),
                ConsoleError::TooManyLogins => (StatusCode::TOO_MANY_REQUESTS, "too_many_logins"),
                ConsoleError::NoSession => (StatusCode::UNAUTHORIZED, "no_session"),
                ConsoleError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
                ConsoleError::Csrf => (StatusCode::FORBIDDEN, "csrf"),
                ConsoleError::Invalid(_) => (StatusCode::BAD_REQUEST, "invalid"),
                ConsoleError::UsernameTaken => (StatusCode::CONFLICT, "username_taken"),
                ConsoleError::NotFound => (StatusCode::NOT_FOUND, "not_found"),
                ConsoleError::Store(StoreError::Unavailable(_) | StoreError::Closed) => {
                    (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
                }
                ConsoleError::Store(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            },
            ConsoleApiError::TooManyRequests => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ConsoleApiError::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            ConsoleApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "invalid"),
            ConsoleApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ConsoleApiError::Off => (StatusCode::NOT_FOUND, "console_off"),
            ConsoleApiError::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl IntoResponse for ConsoleApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = match &self {
            // A database's own message may name tables or hosts: logged, not shown.
            ConsoleApiError::Console(ConsoleError::Store(e)) => {
                tracing::warn!(error = %e, "console request failed in the store");
                "internal error".to_owned()
            }
            other => other.to_string(),
        };
        (
            status,
            Json(serde_json::json!({"error": code, "message": message})),
        )
            .into_response()
    }
}

/// A user id from a route's path; anything else is refused as a bad request.
pub(super) fn user_id(text: &str) -> Result<uuid::Uuid, ConsoleApiError> {
    uuid::Uuid::parse_str(text).map_err(|_| ConsoleApiError::BadRequest("Not a user id.".into()))
}
