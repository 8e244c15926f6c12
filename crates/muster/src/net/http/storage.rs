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
    DeleteStorageObjectsRequest, ReadStorageObjectsRequest, StorageObjectAcks, StorageObjectList,
    StorageObjects, WriteStorageObjectsRequest,
};
use serde::Deserialize;
use serde_json::json;

use super::auth::Player;
use super::extract::{ApiJson, ApiQuery};
use super::response::{Answer, Done};
use crate::storage::wire::{api_object, owner_id};
use crate::storage::{Caller, ObjectId, StorageError};

pub async fn write(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<WriteStorageObjectsRequest>,
) -> Answer<StorageObjectAcks> {
    let objects = request.objects.into_iter().map(Into::into).collect();
    let acks = services
        .storage
        .write(Caller::Player(caller.uid), objects)
        .await?;
    let acks = acks.into_iter().map(Into::into).collect();
    Ok(Json(StorageObjectAcks { acks }))
}

pub async fn read(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<ReadStorageObjectsRequest>,
) -> Answer<StorageObjects> {
    let ids = request
        .object_ids
        .into_iter()
        .map(ObjectId::try_from)
        .collect::<Result<Vec<_>, StorageError>>()?;
    let found = services
        .storage
        .read(Caller::Player(caller.uid), ids)
        .await?;
    let objects = found.into_iter().map(api_object).collect();
    Ok(Json(StorageObjects { objects }))
}

pub async fn delete(
    Player(caller, services, _): Player,
    ApiJson(request): ApiJson<DeleteStorageObjectsRequest>,
) -> Done {
    let objects = request.object_ids.into_iter().map(Into::into).collect();
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

/// Both listing routes: the owner in the query (`/v2/storage/{collection}`) or in the path.
pub async fn list(
    Player(caller, services, _): Player,
    Path(path): Path<Vec<String>>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Answer<StorageObjectList> {
    let mut segments = path.into_iter();
    let collection = segments.next().unwrap_or_default();
    let owner = segments.next().or(query.user_id).unwrap_or_default();
    let page = services
        .storage
        .list(
            Caller::Player(caller.uid),
            &collection,
            owner_id(&owner)?,
            query.limit,
            query.cursor.as_deref(),
        )
        .await?;
    Ok(Json(page.into()))
}
