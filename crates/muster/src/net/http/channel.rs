//! `GET /v2/channel/{channel_id}`: a page of a channel's stored history (messages sent by
//! sockets that joined with persistence), as Nakama's `ListChannelMessages`.
//!
//! Query: `limit` (1–100, default 1 as in Nakama), `forward` (true: oldest first, the default),
//! `cursor` (a `next_cursor` or `prev_cursor` from an earlier page of the same listing, or a
//! `cacheable_cursor` with `forward=true`). Who may read what is [`crate::chat::history`]'s.

use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::Json;
use muster_proto::api::ChannelMessageList;
use serde::Deserialize;

use super::auth::Player;
use super::error::ApiError;
use super::extract::ApiQuery;
use super::response::Answer;
use crate::chat::history::HistoryRequest;

#[derive(Deserialize)]
pub struct ListQuery {
    limit: Option<i64>,
    forward: Option<bool>,
    cursor: Option<String>,
}

pub async fn list_messages(
    Player(caller, services, _): Player,
    path: Result<Path<String>, PathRejection>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer<ChannelMessageList> {
    let Path(channel_id) =
        path.map_err(|e| ApiError::InvalidArgument(format!("Invalid channel ID: {e}.")))?;
    let request = HistoryRequest {
        reader: Some(caller.uid),
        channel_id,
        limit: query.limit,
        forward: query.forward.unwrap_or(true),
        cursor: query.cursor.unwrap_or_default(),
    };
    Ok(Json(services.chat.history(request).await?))
}
