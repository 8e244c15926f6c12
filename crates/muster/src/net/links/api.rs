//! The authenticated links API: a link's clicks per day, and disabling a link. For the link's
//! owner (the account that made it, by session token) or the API key.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;

use super::create::link_json;
use super::short_base;
use crate::base::clock::rfc3339;
use crate::links::{Viewer, DAY_MS};
use crate::net::http::auth::LinkCaller;
use crate::net::http::error::ApiError;
use crate::net::http::extract::ApiQuery;
use crate::net::state::AppState;

fn viewer(caller: LinkCaller) -> Result<Viewer, ApiError> {
    match caller {
        LinkCaller::Account(id) => Ok(Viewer::Account(id)),
        LinkCaller::ApiKey => Ok(Viewer::ApiKey),
        LinkCaller::Anonymous => Err(ApiError::Unauthenticated(
            "Send the links API key or the owner's session token as a bearer token.".into(),
        )),
    }
}

#[derive(Deserialize)]
pub struct StatsQuery {
    /// Days of clicks to read, today included.
    #[serde(default = "default_days")]
    days: u32,
}

fn default_days() -> u32 {
    90
}

/// `GET /api/links/{code}?days=90`: the link, its visits and its clicks per day over the last
/// `days` days.
pub async fn stats(
    State(state): State<AppState>,
    caller: LinkCaller,
    Path(code): Path<String>,
    ApiQuery(query): ApiQuery<StatsQuery>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    let stats = state
        .services
        .links
        .stats(&code, viewer(caller)?, query.days)
        .await?;
    let mut json = link_json(&short_base(&state, &headers), &stats.link);
    json["visits"] = stats.visits.into();
    json["disabled"] = stats.link.disabled.into();
    json["clicks"] = stats
        .clicks
        .iter()
        .map(|(day, count)| {
            let date = rfc3339(i64::from(*day) * DAY_MS);
            serde_json::json!({ "day": date.get(..10).unwrap_or(&date), "count": count })
        })
        .collect::<Vec<_>>()
        .into();
    Ok(Json(json))
}

/// `DELETE /api/links/{code}`: the link answers 410 Gone from now on.
pub async fn disable(
    State(state): State<AppState>,
    caller: LinkCaller,
    Path(code): Path<String>,
) -> Result<Response, ApiError> {
    state.services.links.disable(&code, viewer(caller)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
