//! Answer bodies beyond axum's: [`LargeJson`], a JSON body written into a buffer sized for it
//! up front (axum's `Json` starts at 128 bytes and doubles, copying a large listing's body
//! about a dozen times on its way to 300 KB).

use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::error::ApiError;

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
