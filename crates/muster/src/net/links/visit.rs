//! Following a short link, its QR code, and the app association documents.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::{answer_error, short_base};
use crate::links::platform::{is_preview_agent, Platform};
use crate::links::target::with_query;
use crate::net::http::error::ApiError;
use crate::net::state::AppState;

/// `GET /{code}`: 308 Permanent Redirect to the link's URL, or to the visitor's platform's
/// fallback, with the visitor's query string added. HEAD requests and link previews are
/// answered the same but not counted. `no-store`: a browser that cached the
/// redirect would skip the click count, the expiry and the visit limit.
pub async fn redirect(
    State(state): State<AppState>,
    Path(code): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let user_agent = headers
        .get(header::USER_AGENT)
        .and_then(|ua| ua.to_str().ok())
        .unwrap_or("");
    let platform = Platform::from_user_agent(user_agent);
    // A HEAD request or a link preview looks at the link without visiting it.
    let counted = method != Method::HEAD && !is_preview_agent(user_agent);
    let target = match state.services.links.visit(&code, platform, counted).await {
        Ok(target) => target,
        Err(error) => return answer_error(&headers, error.into()),
    };
    let location = with_query(&target, uri.query().unwrap_or(""));
    match HeaderValue::from_str(&location) {
        Ok(location) => (
            StatusCode::PERMANENT_REDIRECT,
            [
                (header::LOCATION, location),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
            ],
        )
            .into_response(),
        Err(_) => answer_error(
            &headers,
            ApiError::InvalidArgument("The query string cannot be passed on.".into()),
        ),
    }
}

/// `GET /{code}/qr.svg`: the short URL as a QR code, for links that exist.
pub async fn qr(
    State(state): State<AppState>,
    Path(code): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(error) = state.services.links.exists(&code).await {
        return answer_error(&headers, error.into());
    }
    let short_url = format!("{}/{code}", short_base(&state, &headers));
    // Built from the Host header when no public_url is set: then no shared cache may keep it
    // (a forged Host must not poison what other visitors get).
    let caching = if state.services.config.links.public_url.is_empty() {
        "private, max-age=3600"
    } else {
        "public, max-age=86400"
    };
    match crate::links::qr::svg(&short_url) {
        Some(svg) => (
            [
                (header::CONTENT_TYPE, "image/svg+xml"),
                (header::CACHE_CONTROL, caching),
            ],
            svg,
        )
            .into_response(),
        None => answer_error(
            &headers,
            ApiError::InvalidArgument("The short URL is too long for a QR code.".into()),
        ),
    }
}

fn json_document(document: Option<&String>, what: &str) -> Response {
    match document {
        Some(json) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "public, max-age=3600"),
            ],
            json.clone(),
        )
            .into_response(),
        None => ApiError::NotFound(format!("No {what} is configured.")).into_response(),
    }
}

/// `GET /apple-app-site-association` (and under `/.well-known/`).
pub async fn apple(State(state): State<AppState>) -> Response {
    json_document(
        state.services.links.apps().apple.as_ref(),
        "iOS app (links.apple_app_ids)",
    )
}

/// `GET /.well-known/assetlinks.json`.
pub async fn android(State(state): State<AppState>) -> Response {
    json_document(
        state.services.links.apps().android.as_ref(),
        "Android app (links.android_package)",
    )
}
