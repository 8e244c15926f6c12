//! Leaderboard records over Nakama's REST routes, for the caller's session (rules in
//! [`crate::leaderboards`]):
//!
//! - `POST /v2/leaderboard/{leaderboard_id}` writes the caller's record (`LeaderboardRecordWrite` →
//!   `LeaderboardRecord`);
//! - `GET /v2/leaderboard/{leaderboard_id}?owner_ids=&owner_ids=&limit=&cursor=&expiry=` lists
//!   (`LeaderboardRecordList`);
//! - `GET /v2/leaderboard/{leaderboard_id}/owner/{owner_id}?limit=&cursor=&expiry=` lists around an owner;
//! - `DELETE /v2/leaderboard/{leaderboard_id}` deletes the caller's record.

use axum::extract::{Path, RawQuery};
use axum::Json;
use muster_proto::api::{LeaderboardRecord, LeaderboardRecordList, LeaderboardRecordWrite};
use serde_json::json;
use uuid::Uuid;

use super::auth::Player;
use super::error::ApiError;
use super::extract::ApiJson;
use super::response::{Answer, Done};
use crate::leaderboards::view::{list_of, record};
use crate::leaderboards::{Caller, PageAsk, Submission};

pub async fn write(
    Player(caller, services, _): Player,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<LeaderboardRecordWrite>,
) -> Answer<LeaderboardRecord> {
    let submission = submission(caller.uid, &caller.usn, body);
    let written = services
        .leaderboards
        .write(Caller::Player(caller.uid), &id, submission);
    Ok(Json(record(written.await?)))
}

pub async fn delete(Player(caller, services, _): Player, Path(id): Path<String>) -> Done {
    services
        .leaderboards
        .delete_record(Caller::Player(caller.uid), &id, caller.uid)
        .await?;
    Ok(Json(json!({})))
}

/// A caller's `LeaderboardRecordWrite` as the submission of their own record.
pub fn submission(owner: Uuid, username: &str, body: LeaderboardRecordWrite) -> Submission {
    Submission {
        owner,
        username: username.to_owned(),
        score: body.score,
        subscore: body.subscore,
        metadata: (!body.metadata.is_empty()).then_some(body.metadata),
        operator: body.operator,
    }
}

/// A listing's query: `owner_ids` may repeat (as Nakama's gateway reads a repeated field).
pub struct ListQuery {
    pub owner_ids: Vec<Uuid>,
    pub page: PageAsk,
}

pub fn parse_query(raw: Option<&str>) -> Result<ListQuery, ApiError> {
    let mut query = ListQuery {
        owner_ids: Vec::new(),
        page: PageAsk::default(),
    };
    for (name, value) in form_urlencoded::parse(raw.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "owner_ids" | "ownerIds" => {
                query.owner_ids.push(Uuid::parse_str(&value).map_err(|_| {
                    ApiError::InvalidArgument("One or more owner IDs are invalid.".into())
                })?)
            }
            "limit" => {
                query.page.limit =
                    Some(value.parse().map_err(|_| {
                        ApiError::InvalidArgument(format!("Invalid limit {value:?}."))
                    })?)
            }
            "cursor" => query.page.cursor = Some(value.into_owned()),
            "expiry" => {
                query.page.expiry = value
                    .parse()
                    .map_err(|_| ApiError::InvalidArgument(format!("Invalid expiry {value:?}.")))?
            }
            _ => {}
        }
    }
    Ok(query)
}

pub async fn list_records(
    Player(_, services, _): Player,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Answer<LeaderboardRecordList> {
    let query = parse_query(raw.as_deref())?;
    let page = services.leaderboards.list(&id, query.owner_ids, query.page);
    Ok(Json(list_of(page.await?)))
}

pub async fn around_owner(
    Player(_, services, _): Player,
    Path((id, owner)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Answer<LeaderboardRecordList> {
    let owner = owner_id(&owner)?;
    let query = parse_query(raw.as_deref())?;
    let page = services.leaderboards.around_owner(&id, owner, query.page);
    Ok(Json(list_of(page.await?)))
}

/// An owner id of a route's path.
pub fn owner_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError::InvalidArgument("Invalid owner ID provided.".into()))
}
