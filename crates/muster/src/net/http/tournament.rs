//! Tournaments over Nakama's REST routes, for the caller's session (rules in
//! [`crate::leaderboards::tournament`]):
//!
//! - `GET /v2/tournament?category_start=&category_end=&start_time=&end_time=&limit=&cursor=`
//!   lists tournaments (`TournamentList`);
//! - `POST /v2/tournament/{tournament_id}/join` joins the caller;
//! - `PUT|POST /v2/tournament/{tournament_id}` writes the caller's record (`LeaderboardRecord`);
//! - `GET /v2/tournament/{tournament_id}?owner_ids=&limit=&cursor=&expiry=` and
//!   `GET /v2/tournament/{tournament_id}/owner/{owner_id}` list records (`TournamentRecordList`).

use axum::extract::{Path, RawQuery};
use axum::Json;
use muster_proto::api::{
    LeaderboardRecord, LeaderboardRecordList, LeaderboardRecordWrite, TournamentList,
};
use serde::Deserialize;
use serde_json::json;

use super::auth::Player;
use super::extract::{ApiJson, ApiQuery};
use super::leaderboard::{owner_id, parse_query, submission};
use super::response::{Answer, Done};
use crate::leaderboards::view::{list_of, record, tournament};
use crate::leaderboards::Caller;

/// `GET /v2/tournament`'s query.
#[derive(Deserialize)]
pub struct ListQuery {
    category_start: Option<i32>,
    category_end: Option<i32>,
    start_time: Option<i64>,
    end_time: Option<i64>,
    limit: Option<usize>,
    cursor: Option<String>,
}

pub async fn list(
    Player(_, services, _): Player,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer<TournamentList> {
    let (found, cursor) = services
        .leaderboards
        .list_tournaments(
            query.category_start.unwrap_or(0),
            query.category_end.unwrap_or(127),
            query.start_time,
            query.end_time,
            query
                .limit
                .unwrap_or(crate::leaderboards::tournament::MAX_LIST_LIMIT),
            query.cursor.as_deref(),
        )
        .await?;
    Ok(Json(TournamentList {
        tournaments: found.into_iter().map(tournament).collect(),
        cursor: cursor.unwrap_or_default(),
    }))
}

pub async fn join(Player(caller, services, _): Player, Path(id): Path<String>) -> Done {
    services
        .leaderboards
        .join_tournament(&id, caller.uid, &caller.usn)
        .await?;
    Ok(Json(json!({})))
}

pub async fn write(
    Player(caller, services, _): Player,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<LeaderboardRecordWrite>,
) -> Answer<LeaderboardRecord> {
    let submission = submission(caller.uid, &caller.usn, body);
    let boards = &services.leaderboards;
    let written = boards.write_tournament(Caller::Player(caller.uid), &id, submission);
    Ok(Json(record(written.await?)))
}

pub async fn list_records(
    Player(_, services, _): Player,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Answer<LeaderboardRecordList> {
    let query = parse_query(raw.as_deref())?;
    let boards = &services.leaderboards;
    let page = boards.list_tournament_records(&id, query.owner_ids, query.page);
    Ok(Json(list_of(page.await?)))
}

pub async fn around_owner(
    Player(_, services, _): Player,
    Path((id, owner)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Answer<LeaderboardRecordList> {
    let owner = owner_id(&owner)?;
    let query = parse_query(raw.as_deref())?;
    let leaderboards = &services.leaderboards;
    leaderboards.tournament_exists(&id)?;
    let page = leaderboards.around_owner(&id, owner, query.page);
    Ok(Json(list_of(page.await?)))
}
