//! `GET /v2/channel/{channel_id}`: a page of a channel's stored history (messages sent by
//! sockets that joined with persistence), as Nakama's `ListChannelMessages`.
//!
//! Query: `limit` (1–100, default 1 as in Nakama), `forward` (true: oldest first, the default),
//! `cursor` (a `next_cursor` or `prev_cursor` from an earlier page of the same listing, or a
//! `cacheable_cursor` with `forward=true`). Rooms are readable by any signed-in user, a direct
//! chat only by its two users; groups do not exist on this server yet.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::Json;
use muster_proto::api::ChannelMessageList;
use muster_proto::realtime::{ChannelId, ChannelMessage};
use muster_proto::wire::Timestamp;
use serde::Deserialize;

use super::auth::Player;
use super::error::ApiError;
use super::extract::ApiQuery;
use crate::chat::cursor::{Cursor, Plan, MAX_LIMIT};
use crate::chat::ids::Fields;
use crate::state::AppState;
use crate::store::HistoryQuery;

#[derive(Deserialize)]
pub struct ListQuery {
    limit: Option<i64>,
    forward: Option<bool>,
    cursor: Option<String>,
}

pub async fn list_messages(
    Player(caller): Player,
    State(state): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<ChannelMessageList>, ApiError> {
    let Path(channel_id) =
        path.map_err(|e| ApiError::InvalidArgument(format!("Invalid channel ID: {e}.")))?;
    let channel = ChannelId::parse(&channel_id)
        .map_err(|e| ApiError::InvalidArgument(format!("Invalid channel ID: {e}.")))?;
    match &channel {
        ChannelId::Room(_) => {}
        ChannelId::Group(_) => {
            return Err(ApiError::NotFound(
                "Groups are not available on this server.".into(),
            ))
        }
        ChannelId::Direct(one, two) => {
            let me = caller.uid.to_string();
            if me != *one && me != *two {
                return Err(ApiError::PermissionDenied(
                    "Only the two users of a direct chat can read its history.".into(),
                ));
            }
        }
    }
    let limit = match query.limit {
        None => 1,
        Some(n) if (1..=MAX_LIMIT as i64).contains(&n) => n as usize,
        Some(_) => {
            return Err(ApiError::InvalidArgument(format!(
                "Invalid limit: it must be between 1 and {MAX_LIMIT}."
            )))
        }
    };
    let forward = query.forward.unwrap_or(true);
    let incoming = query.cursor.unwrap_or_default();
    let cursor = if incoming.is_empty() {
        None
    } else {
        Some(
            Cursor::decode(&incoming, &channel_id, forward)
                .map_err(|e| ApiError::InvalidArgument(e.to_string()))?,
        )
    };
    let plan = Plan::new(forward, limit, cursor);
    let rows = state
        .store
        .channel_messages(HistoryQuery {
            channel_id: channel_id.clone(),
            ascending: plan.ascending,
            from_seq: plan.from_seq,
            limit: plan.read,
        })
        .await?;
    let page = plan.page(rows, &channel_id, &incoming);
    let fields = Fields::of(&channel_id);
    let messages = page
        .rows
        .into_iter()
        .map(|row| {
            let m = row.message;
            ChannelMessage {
                channel_id: m.channel_id,
                message_id: m.id.to_string(),
                code: Some(m.code),
                sender_id: m.sender_id.to_string(),
                username: m.username,
                content: m.content,
                create_time: Some(Timestamp::from_unix_ms(m.create_time_ms)),
                update_time: Some(Timestamp::from_unix_ms(m.update_time_ms)),
                persistent: Some(true),
                room_name: fields.room_name.to_owned(),
                group_id: fields.group_id.to_owned(),
                user_id_one: fields.user_id_one.to_owned(),
                user_id_two: fields.user_id_two.to_owned(),
            }
        })
        .collect();
    Ok(Json(ChannelMessageList {
        messages,
        next_cursor: page.next_cursor.unwrap_or_default(),
        prev_cursor: page.prev_cursor.unwrap_or_default(),
        cacheable_cursor: page.cacheable_cursor.unwrap_or_default(),
    }))
}
