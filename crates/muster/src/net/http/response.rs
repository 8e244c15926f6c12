//! Answer bodies: [`Answer`] (a JSON body or the API's error), [`Done`] and [`done`] (the empty
//! body `{}` of a change), and [`LargeJson`], a JSON body written into a buffer sized for it up
//! front (axum's `Json` starts at 128 bytes and doubles, copying a large listing's body about a
//! dozen times on its way to 300 KB).

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::error::ApiError;

/// What a route answers: its JSON body, or the API's error.
pub type Answer<T> = Result<axum::Json<T>, ApiError>;

/// What a change answers: `{}`, or the API's error.
pub type Done = Answer<serde_json::Value>;

/// The empty body `{}` Nakama answers a change with.
pub fn done() -> Done {
    Ok(axum::Json(serde_json::json!({})))
}

/// A JSON body expected to take about `.1` bytes.
pub struct LargeJson<T>(pub T, pub usize);

impl<T: Serialize> IntoResponse for LargeJson<T> {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(self.1);
        match serde_json::to_writer(&mut body, &self.0) {
            Ok(()) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
            Err(error) => {
                tracing::error!(%error, "could not encode an answer");
                ApiError::Internal.into_response()
            }
        }
    }
}
