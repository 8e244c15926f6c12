//! What a player wrote, for the account page and the export: their storage objects across
//! collections (values shortened in a page, whole in an export) and their chat messages across
//! channels, newest first — page by page, never a whole table.

use axum::extract::{Path, Query};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::auth::{As, Readonly};
use super::error::{domain, user_id};
use super::{Answer, ConsoleApiError};
use crate::net::state::AppState;
use crate::storage::wire::listed;

/// Objects and messages per page.
pub const PAGE: usize = 50;

/// A page of `owner`'s storage objects after `cursor`: (objects, the next page's cursor).
/// `preview` shortens each value (the page notes each value's size).
pub async fn storage_page(
    state: &AppState,
    owner: Uuid,
    cursor: Option<&str>,
    preview: bool,
) -> Result<(Vec<Value>, Option<String>), ConsoleApiError> {
    let page = state
        .services
        .storage
        .list_owned(owner, PAGE, cursor)
        .await
        .map_err(domain)?;
    let objects = page
        .objects
        .into_iter()
        .map(|record| listed(record, preview.then_some(super::data::PREVIEW)))
        .collect();
    Ok((objects, page.cursor))
}

/// A page of the messages `sender` sent before `before`: (messages, the next page's position).
pub async fn messages_page(
    state: &AppState,
    sender: Uuid,
    before: Option<i64>,
) -> Result<(Vec<Value>, Option<i64>), ConsoleApiError> {
    let (messages, next) = state
        .services
        .chat
        .sent_by(sender, before, PAGE)
        .await
        .map_err(domain)?;
    let messages = messages
        .into_iter()
        .map(|m| serde_json::to_value(m).unwrap_or_default())
        .collect();
    Ok((messages, next))
}

#[derive(Deserialize)]
pub struct StorageQuery {
    cursor: Option<String>,
}

/// `GET /api/accounts/{id}/storage?cursor=`: the next page of the player's objects.
pub async fn storage(
    As { state, .. }: As<Readonly>,
    Path(id): Path<String>,
    Query(query): Query<StorageQuery>,
) -> Answer {
    let (objects, cursor) =
        storage_page(&state, user_id(&id)?, query.cursor.as_deref(), true).await?;
    Ok(Json(json!({"objects": objects, "cursor": cursor})))
}

#[derive(Deserialize)]
pub struct MessagesQuery {
    before: Option<i64>,
}

/// `GET /api/accounts/{id}/messages?before=`: the next page of the player's messages.
pub async fn messages(
    As { state, .. }: As<Readonly>,
    Path(id): Path<String>,
    Query(query): Query<MessagesQuery>,
) -> Answer {
    let (messages, next) = messages_page(&state, user_id(&id)?, query.before).await?;
    Ok(Json(json!({"messages": messages, "before": next})))
}
