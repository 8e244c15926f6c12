//! Storage in Nakama's shapes: the REST bodies read into this slice's requests, and its
//! records, acks and pages written back as Nakama's messages, so every adapter (the HTTP API,
//! the console, server modules) speaks the same objects.

use muster_proto::api;
use uuid::Uuid;

use super::store::StorageRecord;
use super::{Ack, DeleteObject, ObjectId, Page, StorageError, WriteObject};
use crate::base::clock::rfc3339;

/// A user id as a client sends it: empty for the system, else a UUID.
pub fn owner_id(text: &str) -> Result<Option<Uuid>, StorageError> {
    if text.is_empty() {
        return Ok(None);
    }
    Uuid::parse_str(text)
        .map(Some)
        .map_err(|_| StorageError::Invalid("Invalid user ID - must be UUID.".into()))
}

/// A player's write: always of their own object (`owner` is the caller's).
impl From<api::WriteStorageObject> for WriteObject {
    fn from(o: api::WriteStorageObject) -> Self {
        WriteObject {
            collection: o.collection,
            key: o.key,
            owner: None,
            value: o.value,
            version: o.version,
            read: o.permission_read,
            write: o.permission_write,
        }
    }
}

/// A player's delete: always of their own object.
impl From<api::DeleteStorageObjectId> for DeleteObject {
    fn from(id: api::DeleteStorageObjectId) -> Self {
        DeleteObject {
            collection: id.collection,
            key: id.key,
            owner: None,
            version: id.version,
        }
    }
}

impl TryFrom<api::ReadStorageObjectId> for ObjectId {
    type Error = StorageError;

    fn try_from(id: api::ReadStorageObjectId) -> Result<Self, StorageError> {
        Ok(ObjectId {
            owner: owner_id(&id.user_id)?,
            collection: id.collection,
            key: id.key,
        })
    }
}

impl From<Ack> for api::StorageObjectAck {
    fn from(ack: Ack) -> Self {
        api::StorageObjectAck {
            collection: ack.collection,
            key: ack.key,
            version: ack.version,
            user_id: ack.owner.map(|o| o.to_string()).unwrap_or_default(),
            create_time: rfc3339(ack.create_time_ms),
            update_time: rfc3339(ack.update_time_ms),
        }
    }
}

impl From<Page> for api::StorageObjectList {
    fn from(page: Page) -> Self {
        api::StorageObjectList {
            objects: page.objects.into_iter().map(api_object).collect(),
            cursor: page.cursor.unwrap_or_default(),
        }
    }
}

/// A stored object as Nakama renders it (no `user_id` for a system object).
pub fn api_object(record: StorageRecord) -> api::StorageObject {
    api::StorageObject {
        user_id: if record.id.owner.is_nil() {
            String::new()
        } else {
            record.id.owner.to_string()
        },
        collection: record.id.collection,
        key: record.id.key,
        value: record.value,
        version: record.version,
        permission_read: i32::from(record.read),
        permission_write: i32::from(record.write),
        create_time: rfc3339(record.create_time_ms),
        update_time: rfc3339(record.update_time_ms),
    }
}

/// An object as a listing shows it, with its value's size in bytes; with `preview`, its value
/// cut to that many characters, so a page of large values stays small.
pub fn listed(record: StorageRecord, preview: Option<usize>) -> serde_json::Value {
    let size = record.value.len();
    let mut object = serde_json::to_value(api_object(record)).unwrap_or_default();
    if let (Some(chars), Some(value)) = (preview, object.get_mut("value")) {
        let short: String = value.as_str().unwrap_or("").chars().take(chars).collect();
        *value = serde_json::Value::String(short);
    }
    object["size"] = size.into();
    object
}
