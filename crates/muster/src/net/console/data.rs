//! Storage objects: a collection's objects page by page (values shortened in the listing, so a
//! page of large values costs little), one object whole, and an operator's write, which must
//! name the version it read: an edit of a stale version is refused and changes nothing.

use axum::extract::Query;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::auth::{console, As, Developer, Readonly};
use super::error::domain;
use super::{Answer, ConsoleApiError};
use crate::storage::wire::{api_object, listed};
use crate::storage::{Caller, ObjectId, StorageError, WriteObject};

/// Objects per page of a listing.
const PAGE: usize = 50;
/// Characters of a value a listing shows.
pub(super) const PREVIEW: usize = 200;

/// An owner as the page sends it: a user id, or empty for system objects.
fn owner(text: Option<&str>) -> Result<Option<Uuid>, ConsoleApiError> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => Uuid::parse_str(t)
            .map(Some)
            .map_err(|_| ConsoleApiError::BadRequest("The owner is a user id, or empty.".into())),
    }
}

#[derive(Deserialize)]
pub struct ListQuery {
    collection: String,
    owner: Option<String>,
    cursor: Option<String>,
}

/// `GET /api/storage?collection=&owner=&cursor=`.
pub async fn list(As { state, .. }: As<Readonly>, Query(query): Query<ListQuery>) -> Answer {
    let page = state
        .services
        .storage
        .list(
            Caller::Server,
            &query.collection,
            owner(query.owner.as_deref())?,
            Some(PAGE),
            query.cursor.as_deref(),
        )
        .await
        .map_err(domain)?;
    let objects: Vec<Value> = page
        .objects
        .into_iter()
        .map(|record| listed(record, Some(PREVIEW)))
        .collect();
    Ok(Json(json!({"objects": objects, "cursor": page.cursor})))
}

#[derive(Deserialize)]
pub struct ObjectQuery {
    collection: String,
    key: String,
    owner: Option<String>,
}

/// `GET /api/storage/object?collection=&key=&owner=`: one object, whole.
pub async fn read(As { state, .. }: As<Readonly>, Query(query): Query<ObjectQuery>) -> Answer {
    let found = state
        .services
        .storage
        .read(
            Caller::Server,
            vec![ObjectId {
                collection: query.collection,
                key: query.key,
                owner: owner(query.owner.as_deref())?,
            }],
        )
        .await
        .map_err(domain)?;
    let record = found.into_iter().next().ok_or(ConsoleApiError::NotFound)?;
    Ok(Json(
        serde_json::to_value(api_object(record)).unwrap_or_default(),
    ))
}

#[derive(Deserialize)]
pub struct WriteBody {
    collection: String,
    key: String,
    owner: Option<String>,
    /// The JSON object to store, as text.
    value: String,
    /// The version the editor read; `*` to create an object that must not exist yet.
    version: String,
    permission_read: Option<i32>,
    permission_write: Option<i32>,
}

/// `POST /api/storage/object`: writes one object as the server, only over the version read.
pub async fn write(
    As {
        state, operator, ..
    }: As<Developer>,
    Json(body): Json<WriteBody>,
) -> Answer {
    if body.version.is_empty() {
        return Err(ConsoleApiError::BadRequest(
            "Name the version you edited (or * for a new object).".into(),
        ));
    }
    let owner = owner(body.owner.as_deref())?;
    let acks = state
        .services
        .storage
        .write(
            Caller::Server,
            vec![WriteObject {
                collection: body.collection.clone(),
                key: body.key.clone(),
                owner,
                value: body.value,
                version: body.version.clone(),
                read: body.permission_read,
                write: body.permission_write,
            }],
        )
        .await
        .map_err(|e| match e {
            StorageError::VersionRejected => ConsoleApiError::Conflict(
                "The object changed since you read it (or exists already); reload it and edit again."
                    .into(),
            ),
            other => domain(other),
        })?;
    let ack = acks.into_iter().next().ok_or(ConsoleApiError::Internal)?;
    let target = format!(
        "{}/{}/{}",
        body.collection,
        body.key,
        owner.map(|o| o.to_string()).unwrap_or_default()
    );
    console(&state)?
        .audit(
            &operator,
            "storage_write",
            &target,
            json!({"previous_version": body.version, "version": ack.version}),
        )
        .await?;
    Ok(Json(json!({"version": ack.version})))
}
