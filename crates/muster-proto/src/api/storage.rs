//! Storage objects over REST, as Nakama's gateway renders them (`nakama.api` in nakama-common's
//! `api/api.proto`): `PUT /v2/storage` writes, `POST /v2/storage` reads, `PUT /v2/storage/delete`
//! deletes, `GET /v2/storage/{collection}[/{user_id}]` lists.
//!
//! As protojson does, fields at their zero value are left out of answers (a system object has no
//! `user_id`, a read permission of 0 no `permission_read`), and requests are read under their
//! proto names or their camelCase JSON names.

use serde::{Deserialize, Serialize};

fn is_zero(value: &i32) -> bool {
    *value == 0
}

/// One object to write (`WriteStorageObject`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct WriteStorageObject {
    pub collection: String,
    pub key: String,
    /// A JSON object, as a string.
    pub value: String,
    /// `""` writes whatever is there, `"*"` only if nothing is, a version only if unchanged.
    pub version: String,
    /// 0 server only, 1 the owner, 2 everyone; 1 when absent.
    #[serde(alias = "permissionRead", skip_serializing_if = "Option::is_none")]
    pub permission_read: Option<i32>,
    /// 0 server only, 1 the owner; 1 when absent.
    #[serde(alias = "permissionWrite", skip_serializing_if = "Option::is_none")]
    pub permission_write: Option<i32>,
}

/// `PUT /v2/storage` (`WriteStorageObjectsRequest`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct WriteStorageObjectsRequest {
    pub objects: Vec<WriteStorageObject>,
}

/// A stored object (`StorageObject`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct StorageObject {
    pub collection: String,
    pub key: String,
    /// The owner; absent for a system object.
    #[serde(alias = "userId", skip_serializing_if = "String::is_empty")]
    pub user_id: String,
    pub value: String,
    pub version: String,
    #[serde(alias = "permissionRead", skip_serializing_if = "is_zero")]
    pub permission_read: i32,
    #[serde(alias = "permissionWrite", skip_serializing_if = "is_zero")]
    pub permission_write: i32,
    /// RFC 3339.
    #[serde(alias = "createTime")]
    pub create_time: String,
    /// RFC 3339.
    #[serde(alias = "updateTime")]
    pub update_time: String,
}

/// What a write answers for each object (`StorageObjectAck`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct StorageObjectAck {
    pub collection: String,
    pub key: String,
    pub version: String,
    #[serde(alias = "userId", skip_serializing_if = "String::is_empty")]
    pub user_id: String,
    #[serde(alias = "createTime")]
    pub create_time: String,
    #[serde(alias = "updateTime")]
    pub update_time: String,
}

/// The answer to `PUT /v2/storage` (`StorageObjectAcks`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct StorageObjectAcks {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acks: Vec<StorageObjectAck>,
}

/// One object to read (`ReadStorageObjectId`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ReadStorageObjectId {
    pub collection: String,
    pub key: String,
    /// The owner; empty for a system object.
    #[serde(alias = "userId")]
    pub user_id: String,
}

/// `POST /v2/storage` (`ReadStorageObjectsRequest`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ReadStorageObjectsRequest {
    #[serde(alias = "objectIds")]
    pub object_ids: Vec<ReadStorageObjectId>,
}

/// The answer to `POST /v2/storage` (`StorageObjects`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct StorageObjects {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<StorageObject>,
}

/// The answer to `GET /v2/storage/{collection}` (`StorageObjectList`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct StorageObjectList {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<StorageObject>,
    /// The next page's cursor; absent on the last page.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cursor: String,
}

/// One object to delete (`DeleteStorageObjectId`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct DeleteStorageObjectId {
    pub collection: String,
    pub key: String,
    /// Delete only if unchanged since this version; empty: whatever is there.
    pub version: String,
}

/// `PUT /v2/storage/delete` (`DeleteStorageObjectsRequest`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct DeleteStorageObjectsRequest {
    #[serde(alias = "objectIds")]
    pub object_ids: Vec<DeleteStorageObjectId>,
}
