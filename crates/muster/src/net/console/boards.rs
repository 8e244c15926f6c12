//! Leaderboards and tournaments: every board with its definition, a board's records in rank
//! order page by page, and an operator's edit of a board's metadata or deletion of a record
//! (audited).

use axum::extract::{Path, Query};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::auth::{console, As, Developer, Readonly};
use super::error::domain;
use super::{Answer, ConsoleApiError};
use crate::leaderboards::view::list_of;
use crate::leaderboards::{Caller, PageAsk};

/// Records per page.
const PAGE: usize = 50;

/// `GET /api/leaderboards`: every leaderboard and tournament with its definition.
pub async fn list(
    As {
        state, operator: _, ..
    }: As<Readonly>,
) -> Answer {
    let leaderboards = &state.services.leaderboards;
    let mut boards = Vec::new();
    for id in leaderboards.ids() {
        if let Some(info) = leaderboards.leaderboard_info(&id) {
            let def = &info.def;
            boards.push(json!({
                "id": def.id, "tournament": false, "authoritative": def.authoritative,
                "sort_order": def.sort_order, "operator": def.operator,
                "reset_schedule": def.reset_schedule, "metadata": def.metadata,
                "prev_reset": info.prev_reset, "next_reset": info.next_reset,
            }));
        } else if let Some(info) = leaderboards.tournament_info(&id).await.map_err(domain)? {
            let mut t = serde_json::to_value(crate::leaderboards::view::tournament(info))
                .unwrap_or_default();
            t["tournament"] = true.into();
            boards.push(t);
        }
    }
    Ok(Json(json!({ "leaderboards": boards })))
}

#[derive(Deserialize)]
pub struct RecordsQuery {
    cursor: Option<String>,
}

/// `GET /api/leaderboards/{id}/records?cursor=`: the current period's records in rank order.
pub async fn records(
    As { state, .. }: As<Readonly>,
    Path(id): Path<String>,
    Query(query): Query<RecordsQuery>,
) -> Answer {
    let page = state
        .services
        .leaderboards
        .list(
            &id,
            Vec::new(),
            PageAsk {
                limit: Some(PAGE),
                cursor: query.cursor,
                expiry: 0,
            },
        )
        .await
        .map_err(domain)?;
    Ok(Json(
        serde_json::to_value(list_of(page)).unwrap_or_default(),
    ))
}

/// `DELETE /api/leaderboards/{id}/records/{owner}`: the owner's record of the current period.
pub async fn delete_record(
    As {
        state, operator, ..
    }: As<Developer>,
    Path((id, owner)): Path<(String, String)>,
) -> Answer {
    let owner = Uuid::parse_str(&owner)
        .map_err(|_| ConsoleApiError::BadRequest("Not an owner id.".into()))?;
    state
        .services
        .leaderboards
        .delete_record(Caller::Server, &id, owner)
        .await
        .map_err(domain)?;
    console(&state)?
        .audit(
            &operator,
            "leaderboard_record_delete",
            &format!("{id}/{owner}"),
            json!({}),
        )
        .await?;
    Ok(Json(json!({})))
}

#[derive(Deserialize)]
pub struct MetadataBody {
    /// A JSON object, as text.
    metadata: String,
}

/// `POST /api/leaderboards/{id}/metadata`: replaces a leaderboard's or tournament's metadata.
pub async fn set_metadata(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
    Json(body): Json<MetadataBody>,
) -> Answer {
    state
        .services
        .leaderboards
        .set_metadata(&id, body.metadata.clone())
        .await
        .map_err(domain)?;
    console(&state)?
        .audit(
            &operator,
            "leaderboard_metadata",
            &id,
            json!({"metadata": body.metadata}),
        )
        .await?;
    Ok(Json(json!({})))
}
