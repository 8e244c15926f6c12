//! The links service's HTTP edge, on its own listener (`links.listen`) so that it can own a
//! domain's root:
//!
//! | route | what |
//! |---|---|
//! | `GET /`, `GET /index.html` | the index page: a form that makes links |
//! | `POST /` | create a link: JSON (answered in JSON) or the form (answered with a page) |
//! | `GET /{code}` | 308 to the link's URL (or the visitor platform's fallback), query passed on |
//! | `GET /{code}/qr.svg` | the short URL as a QR code |
//! | `GET /apple-app-site-association`, `/.well-known/…` | iOS Universal Links |
//! | `GET /.well-known/assetlinks.json` | Android App Links |
//! | `GET`, `DELETE /api/links/{code}` | a link's clicks per day; disable it (owner or API key) |
//!
//! Every request counts against the client IP's `links.requests_per_ip_per_sec`.

mod api;
mod create;
pub mod page;
mod visit;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::http::edge_layers;
use super::http::error::ApiError;
use super::http::extract::ClientIp;
use crate::net::state::AppState;

pub fn router(state: AppState) -> Router {
    let config = &state.services.config;
    // Four URLs (the link and three fallbacks), percent-encoded at worst, and the rest.
    let body_limit = config.links.max_url_bytes * 4 * 3 + 4096;
    let routes = Router::new()
        .route("/", get(create::index).post(create::create))
        .route("/index.html", get(create::index))
        .route("/apple-app-site-association", get(visit::apple))
        .route("/.well-known/apple-app-site-association", get(visit::apple))
        .route("/.well-known/assetlinks.json", get(visit::android))
        .route("/api/links/{code}", get(api::stats).delete(api::disable))
        .route("/{code}", get(visit::redirect))
        .route("/{code}/qr.svg", get(visit::qr))
        .fallback(not_found);
    edge_layers(routes, &config.limits, body_limit)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            limit_requests,
        ))
        .with_state(state)
}

/// Refuses a request when its client IP is over `links.requests_per_ip_per_sec`.
async fn limit_requests(
    State(state): State<AppState>,
    ClientIp(ip): ClientIp,
    request: Request,
    next: Next,
) -> Response {
    if !state.links_limit.allow(ip) {
        state
            .services
            .metrics
            .rate_limited
            .with_label_values(&["links"])
            .inc();
        let error = ApiError::TooManyRequests("Too many requests; slow down.".into());
        return answer_error(request.headers(), error);
    }
    next.run(request).await
}

async fn not_found(headers: HeaderMap) -> Response {
    answer_error(&headers, ApiError::NotFound("Not found.".into()))
}

/// An error as the client wants it: a page for a browser, Nakama's JSON error body otherwise.
fn answer_error(headers: &HeaderMap, error: ApiError) -> Response {
    let message = error.to_string();
    let response = error.into_response();
    if page::wants_html(headers) {
        page::message(response.status(), &message)
    } else {
        response
    }
}

/// The `host[:port]` the client called, when it is a plausible one.
fn called_as(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|host| {
            !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
        })
}

/// The base of short URLs: `links.public_url`, else `http://` and the host the client called.
fn short_base(state: &AppState, headers: &HeaderMap) -> String {
    let public = state.services.config.links.public_url.trim_end_matches('/');
    if !public.is_empty() {
        return public.to_owned();
    }
    let host = called_as(headers).unwrap_or(state.services.config.links.listen.as_str());
    format!("http://{host}")
}
