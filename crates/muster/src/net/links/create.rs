//! Making links: `POST /` with JSON (answered in JSON) or with the index page's form (answered
//! with a page), and the index page itself.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::{called_as, page, short_base};
use crate::base::clock::rfc3339;
use crate::links::store::{Fallbacks, LinkRecord};
use crate::links::{Created, Creator, LinkRequest};
use crate::net::http::auth::{link_caller, LinkCaller};
use crate::net::http::error::ApiError;
use crate::net::http::extract::{body_error, ClientIp};
use crate::net::state::AppState;

/// The JSON body of `POST /`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    url: String,
    #[serde(default)]
    slug: Option<String>,
    #[serde(default)]
    expires_in_sec: Option<i64>,
    #[serde(default)]
    max_visits: Option<i64>,
    #[serde(default)]
    fallbacks: FallbacksBody,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FallbacksBody {
    ios: Option<String>,
    android: Option<String>,
    desktop: Option<String>,
}

/// `GET /`: the index page.
pub async fn index(State(state): State<AppState>) -> Response {
    page::index(
        StatusCode::OK,
        state.services.config.links.max_url_bytes,
        "",
        "",
        "",
    )
}

/// `POST /`.
pub async fn create(
    State(state): State<AppState>,
    caller: Result<LinkCaller, ApiError>,
    ClientIp(ip): ClientIp,
    request: Request,
) -> Response {
    let headers = request.headers().clone();
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    let body = match Bytes::from_request(request, &state).await {
        Ok(body) => body,
        Err(rejection) => return body_error(rejection).into_response(),
    };
    if is_form {
        create_from_form(&state, ip, &headers, &body).await
    } else {
        match create_from_json(&state, caller, ip, &headers, &body).await {
            Ok(response) => response,
            Err(error) => error.into_response(),
        }
    }
}

fn creator(caller: LinkCaller, ip: std::net::IpAddr) -> Creator {
    match caller {
        LinkCaller::Anonymous => Creator::Public(ip),
        LinkCaller::Account(id) => Creator::Account(id),
        LinkCaller::ApiKey => Creator::ApiKey,
    }
}

async fn create_from_json(
    state: &AppState,
    caller: Result<LinkCaller, ApiError>,
    ip: std::net::IpAddr,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let caller = caller?;
    let body: CreateBody = serde_json::from_slice(body)
        .map_err(|e| ApiError::InvalidArgument(format!("Malformed JSON body: {e}")))?;
    let request = LinkRequest {
        url: body.url,
        slug: body.slug,
        expires_in_sec: body.expires_in_sec,
        max_visits: body.max_visits,
        fallbacks: Fallbacks {
            ios: body.fallbacks.ios,
            android: body.fallbacks.android,
            desktop: body.fallbacks.desktop,
        },
    };
    let Created { link, created } = state
        .services
        .links
        .create(creator(caller, ip), request, called_as(headers))
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut json = link_json(&short_base(state, headers), &link);
    json["created"] = created.into();
    Ok((status, Json(json)).into_response())
}

/// The index page's form: `url`, `slug` and `key` (the API key or a session token).
async fn create_from_form(
    state: &AppState,
    ip: std::net::IpAddr,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let (mut url, mut slug, mut key) = (String::new(), String::new(), String::new());
    for (name, value) in url::form_urlencoded::parse(body) {
        match name.as_ref() {
            "url" => url = value.into_owned(),
            "slug" => slug = value.trim().to_owned(),
            "key" => key = value.trim().to_owned(),
            _ => {}
        }
    }
    let max_url_bytes = state.services.config.links.max_url_bytes;
    let refused = |error: ApiError| {
        let message = error.to_string();
        let status = error.into_response().status();
        page::refused(status, max_url_bytes, &message, &url, &slug)
    };
    let caller = if key.is_empty() {
        LinkCaller::Anonymous
    } else {
        match link_caller(state, &key) {
            Ok(caller) => caller,
            Err(error) => return refused(error),
        }
    };
    let request = LinkRequest {
        url: url.clone(),
        slug: Some(slug.clone()),
        ..LinkRequest::default()
    };
    match state
        .services
        .links
        .create(creator(caller, ip), request, called_as(headers))
        .await
    {
        Ok(Created { link, created }) => {
            let short_url = format!("{}/{}", short_base(state, headers), link.code);
            let status = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            page::made(status, max_url_bytes, &short_url, &link.code, &link.url)
        }
        Err(error) => refused(error.into()),
    }
}

/// A link as the API shows it.
pub fn link_json(base: &str, link: &LinkRecord) -> serde_json::Value {
    let short_url = format!("{base}/{}", link.code);
    serde_json::json!({
        "code": link.code,
        "short_url": short_url,
        "qr_svg_url": format!("{short_url}/qr.svg"),
        "url": link.url,
        "fallbacks": {
            "ios": link.fallbacks.ios,
            "android": link.fallbacks.android,
            "desktop": link.fallbacks.desktop,
        },
        "expires_at": link.expires_at_ms.map(rfc3339),
        "max_visits": link.max_visits,
        "create_time": rfc3339(link.create_time_ms),
    })
}
