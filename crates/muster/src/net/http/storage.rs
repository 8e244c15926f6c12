//! Storage objects over Nakama's REST routes, for the caller's session (rules in
//! [`crate::storage`]):
//!
//! - `PUT /v2/storage` writes (`WriteStorageObjectsRequest` → `StorageObjectAcks`);
//! - `POST /v2/storage` reads (`ReadStorageObjectsRequest` → `StorageObjects`);
//! - `PUT /v2/storage/delete` deletes (`DeleteStorageObjectsRequest` → `{}`);
//! - `GET /v2/storage/{collection}?user_id=&limit=&cursor=` and
//!   `GET /v2/storage/{collection}/{user_id}?limit=&cursor=` list (`StorageObjectList`).

use axum::extract::Path;
use axum::Json;
use muster_proto::api::{
    DeleteStorageObjectsRequest, ReadStorageObjectsRequest, StorageObjectAck, StorageObjectAcks,
    StorageObjectList, StorageObjects, WriteStorageObjectsRequest,
};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::auth::Player;
use super::error::ApiError;
use super::extract::{ApiJson, ApiQuery};
use super::response::{Answer, Done};
use crate::base::clock::rfc3339;
use crate::net::state::AppState;
use crate::storage::{Caller, DeleteObject, ObjectId, WriteObject};

/// A user id as a client sends it: empty for the system, else a UUID.
fn user_id(text: &str) -> Result<Option<Uuid>, ApiError> {
    if text.is_empty() {
        return Ok(None);
    }
    Uuid::parse_str(text)
        .map(Some)
        .map_err(|_| ApiError::InvalidArgument("Invalid user ID - must be UUID.".into()))
}

pub async fn write(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<WriteStorageObjectsRequest>,
) -> Answer<StorageObjectAcks> {
    let objects = request
        .objects
        .into_iter()
        .map(|o| WriteObject {
            collection: o.collection,
            key: o.key,
            owner: None,
            value: o.value,
            version: o.version,
            read: o.permission_read,
            write: o.permission_write,
        })
        .collect();
    let acks = services
        .storage
        .write(Caller::Player(caller.uid), objects)
        .await?;
    Ok(Json(StorageObjectAcks {
        acks: acks
            .into_iter()
            .map(|ack| StorageObjectAck {
                collection: ack.collection,
                key: ack.key,
                version: ack.version,
                user_id: ack.owner.map(|o| o.to_string()).unwrap_or_default(),
                create_time: rfc3339(ack.create_time_ms),
                update_time: rfc3339(ack.update_time_ms),
            })
            .collect(),
    }))
}

pub async fn read(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ReadStorageObjectsRequest>,
) -> Answer<StorageObjects> {
    let ids = request
        .object_ids
        .into_iter()
        .map(|id| {
            Ok(ObjectId {
                owner: user_id(&id.user_id)?,
                collection: id.collection,
                key: id.key,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let found = services
        .storage
        .read(Caller::Player(caller.uid), ids)
        .await?;
    Ok(Json(StorageObjects {
        objects: found.into_iter().map(crate::storage::api_object).collect(),
    }))
}

pub async fn delete(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<DeleteStorageObjectsRequest>,
) -> Done {
    let objects = request
        .object_ids
        .into_iter()
        .map(|id| DeleteObject {
            collection: id.collection,
            key: id.key,
            owner: None,
            version: id.version,
        })
        .collect();
    services
        .storage
        .delete(Caller::Player(caller.uid), objects)
        .await?;
    Ok(Json(json!({})))
}

/// `?user_id=&limit=&cursor=` of a listing.
#[derive(Deserialize)]
pub struct ListQuery {
    user_id: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

pub async fn list(
    Player(caller, _, state): Player,
    Path(collection): Path<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer<StorageObjectList> {
    let owner = user_id(query.user_id.as_deref().unwrap_or_default())?;
    list_page(caller.uid, state, collection, owner, query).await
}

pub async fn list_owned(
    Player(caller, _, state): Player,
    Path((collection, owner)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer<StorageObjectList> {
    let owner = user_id(&owner)?;
    list_page(caller.uid, state, collection, owner, query).await
}

async fn list_page(
    caller: Uuid,
    state: AppState,
    collection: String,
    owner: Option<Uuid>,
    query: ListQuery,
) -> Answer<StorageObjectList> {
    let page = state
        .services
        .storage
        .list(
            Caller::Player(caller),
            &collection,
            owner,
            query.limit,
            query.cursor.as_deref(),
        )
        .await?;
    Ok(Json(StorageObjectList {
        objects: page
            .objects
            .into_iter()
            .map(crate::storage::api_object)
            .collect(),
        cursor: page.cursor.unwrap_or_default(),
    }))
}
