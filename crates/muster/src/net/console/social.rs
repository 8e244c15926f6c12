//! Chat, groups, parties and notifications: a channel's stored messages (any channel: the console
//! reads as the server), groups page by page with their members, this node's parties, and a
//! notification sent to a player.

use axum::extract::{Path, Query};
use axum::Json;
use muster_proto::realtime::ChannelId;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::auth::{console, As, Developer, Readonly};
use super::error::domain;
use super::{Answer, ConsoleApiError};
use crate::chat::history::HistoryRequest;
use crate::groups::GroupQuery;
use crate::notifications::NewNotification;

/// Messages, groups and members per page.
const PAGE: usize = 100;

#[derive(Deserialize)]
pub struct MessagesQuery {
    /// A channel id (`2...lobby`, `3.<group>..`, `4..<one>.<two>`) or a room's name.
    channel: String,
    cursor: Option<String>,
}

/// `GET /api/chat/messages?channel=&cursor=`: a channel's stored messages, newest first.
pub async fn messages(
    As { state, .. }: As<Readonly>,
    Query(query): Query<MessagesQuery>,
) -> Answer {
    let channel_id = if ChannelId::parse(&query.channel).is_ok() {
        query.channel
    } else {
        ChannelId::Room(query.channel).to_string()
    };
    let page = state
        .services
        .chat
        .history(HistoryRequest {
            reader: None,
            channel_id: channel_id.clone(),
            limit: Some(PAGE as i64),
            forward: false,
            cursor: query.cursor.unwrap_or_default(),
        })
        .await
        .map_err(domain)?;
    let mut answer = serde_json::to_value(page).unwrap_or_default();
    answer["channel_id"] = channel_id.into();
    Ok(Json(answer))
}

#[derive(Deserialize)]
pub struct GroupsQuery {
    name: Option<String>,
    #[serde(default)]
    cursor: String,
}

/// `GET /api/groups?name=&cursor=`: groups by name (a prefix, `%` a wildcard) or all, largest
/// first.
pub async fn groups(As { state, .. }: As<Readonly>, Query(query): Query<GroupsQuery>) -> Answer {
    let list = state
        .services
        .groups
        .list(GroupQuery {
            name: query.name.filter(|n| !n.trim().is_empty()).map(|n| {
                if n.ends_with('%') {
                    n
                } else {
                    format!("{n}%")
                }
            }),
            cursor: query.cursor,
            limit: Some(PAGE),
            lang_tag: None,
            members: None,
            open: None,
        })
        .await
        .map_err(domain)?;
    Ok(Json(serde_json::to_value(list).unwrap_or_default()))
}

/// `GET /api/groups/{id}/users`: a group's members (first page), by state.
pub async fn group_users(As { state, .. }: As<Readonly>, Path(id): Path<String>) -> Answer {
    let list = state
        .services
        .groups
        .users(&id, Some(PAGE), None, "")
        .await
        .map_err(domain)?;
    Ok(Json(serde_json::to_value(list).unwrap_or_default()))
}

#[derive(Deserialize)]
pub struct NotifyBody {
    subject: String,
    /// A JSON object, as text.
    #[serde(default = "empty_object")]
    content: String,
    #[serde(default)]
    code: i32,
    #[serde(default = "yes")]
    persistent: bool,
}

fn empty_object() -> String {
    "{}".into()
}

fn yes() -> bool {
    true
}

/// `POST /api/accounts/{id}/notify`: a notification from the system to the player.
pub async fn notify(
    As {
        state, operator, ..
    }: As<Developer>,
    Path(id): Path<String>,
    Json(body): Json<NotifyBody>,
) -> Answer {
    let user_id =
        Uuid::parse_str(&id).map_err(|_| ConsoleApiError::BadRequest("Not a user id.".into()))?;
    state
        .services
        .notifications
        .send(vec![NewNotification {
            user_id,
            subject: body.subject.clone(),
            content: body.content.clone(),
            code: body.code,
            sender_id: None,
            persistent: body.persistent,
        }])
        .await
        .map_err(domain)?;
    console(&state)?
        .audit(
            &operator,
            "notification_send",
            &id,
            json!({"subject": body.subject, "code": body.code, "content": body.content}),
        )
        .await?;
    Ok(Json(json!({})))
}

/// Parties shown at most.
const PARTIES_SHOWN: usize = 200;

/// `GET /api/parties`: the parties this node holds (a party lives on the node of the session
/// that made it), with their members, leader, label and waiting join requests.
pub async fn parties(As { state, .. }: As<Readonly>) -> Answer {
    let parties: Vec<Value> = state
        .services
        .parties
        .owned_views(PARTIES_SHOWN)
        .into_iter()
        .map(|(party, requests)| {
            let mut view = serde_json::to_value(party).unwrap_or_default();
            view["join_requests"] = requests.into();
            view
        })
        .collect();
    Ok(Json(
        json!({"node": state.services.matches.node(), "parties": parties}),
    ))
}
