//! Invite links: a link by its code with its clicks per day, and an operator's disabling of it
//! (as the links API key may).

use axum::extract::{Path, Query};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::auth::{console, As, Developer, Readonly};
use super::error::domain;
use super::Answer;
use crate::links::Viewer;

#[derive(Deserialize)]
pub struct StatsQuery {
    days: Option<u32>,
}

/// `GET /api/links/{code}?days=`: the link, its visits and clicks per day (90 days by default).
pub async fn stats(
    As { state, .. }: As<Readonly>,
    Path(code): Path<String>,
    Query(query): Query<StatsQuery>,
) -> Answer {
    let stats = state
        .services
        .links
        .stats(&code, Viewer::ApiKey, query.days.unwrap_or(90))
        .await
        .map_err(domain)?;
    let link = &stats.link;
    Ok(Json(json!({
        "code": link.code,
        "url": link.url,
        "owner": link.owner,
        "disabled": link.disabled,
        "expires_at_ms": link.expires_at_ms,
        "max_visits": link.max_visits,
        "create_time_ms": link.create_time_ms,
        "visits": stats.visits,
        // UTC days since 1970-01-01, and the clicks on each.
        "clicks": stats.clicks,
    })))
}

/// `DELETE /api/links/{code}`: disables the link for good (410 from then on).
pub async fn disable(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(code): Path<String>,
) -> Answer {
    state
        .services
        .links
        .disable(&code, Viewer::ApiKey)
        .await
        .map_err(domain)?;
    console(&state)?
        .audit(&operator, "link_disable", &code, json!({}))
        .await?;
    Ok(Json(json!({})))
}
