//! Storage objects: a game's own data (saves, settings, progress), with Nakama's semantics.
//!
//! - An object is keyed by collection, key and owner (a user, or the system: the nil id), and
//!   its value is a JSON object of at most `storage.max_value_bytes`.
//! - Its **version** is the MD5 of the value, in hex, as Nakama computes it, so a client's
//!   conditional writes behave the same: version `""` writes whatever is there, `"*"` only if
//!   nothing is, a version only if the object is still at it.
//! - **Permissions**: read 0 (server only), 1 (the owner), 2 (everyone); write 0 (server only),
//!   1 (the owner). Both default to 1. Players write and delete only their own objects.
//! - A write or delete of several objects is all or nothing (one transaction of the store).
//! - Listings return only what the caller may read, paged in (read, key, owner) order by an
//!   opaque cursor; the cursor names a position and the listing it belongs to, never a
//!   permission, so a forged one can only move within what the caller may read anyway.
//! - A player holds at most `storage.max_objects_per_user` objects (the server is not bound).
//!
//! The server's own code calls the same functions as [`Caller::Server`]: it may read and write
//! any object, system-owned ones included.

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod cursor;
pub mod wire;

pub use wire::api_object;

use std::collections::HashSet;
use std::sync::Arc;

use md5::{Digest, Md5};
use uuid::Uuid;

use crate::storage::config::StorageConfig;
use crate::storage::store::{
    Expected, StorageDelete, StorageKey, StorageListing, StorageRecord, StorageRefusal,
    StorageStore, StorageTimes, StorageWrite,
};
use crate::store::StoreError;

/// Longest collection or key, in bytes (Nakama's columns are `VARCHAR(128)`).
pub const MAX_NAME_BYTES: usize = 128;

/// Most objects one listing page may hold, and the page size when none is given.
pub const MAX_LIST_LIMIT: usize = 100;
pub const DEFAULT_LIST_LIMIT: usize = 1;

/// Who asks: a player (their permissions apply) or the server's own code (none do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    Server,
    Player(Uuid),
}

/// Why a storage call changed or returned nothing. Messages are Nakama's and shown to clients.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    #[error("{0}")]
    Invalid(String),
    #[error("Storage write rejected - version check failed.")]
    VersionRejected,
    #[error("Storage write rejected - permission denied.")]
    PermissionRejected,
    #[error("Storage delete rejected - not found, version check failed, or permission denied.")]
    DeleteRejected,
    #[error("Storage write rejected - at most {0} objects per user.")]
    TooManyObjects(u64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One object to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteObject {
    pub collection: String,
    pub key: String,
    /// The owner: the caller for a player (anything else is refused); any user or the system
    /// (`None`) for the server.
    pub owner: Option<Uuid>,
    pub value: String,
    /// `""`, `"*"` or a version.
    pub version: String,
    /// 0, 1 or 2; 1 when `None`.
    pub read: Option<i32>,
    /// 0 or 1; 1 when `None`.
    pub write: Option<i32>,
}

/// What a write answers for each object, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub collection: String,
    pub key: String,
    /// `None` for a system object.
    pub owner: Option<Uuid>,
    pub version: String,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// One object to read: its owner `None` for a system object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectId {
    pub collection: String,
    pub key: String,
    pub owner: Option<Uuid>,
}

/// One object to delete: a player's own (its `owner` ignored), any for the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteObject {
    pub collection: String,
    pub key: String,
    pub owner: Option<Uuid>,
    /// Only if still at this version; `""`: whatever is there.
    pub version: String,
}

/// One page of a listing; `cursor` fetches the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub objects: Vec<StorageRecord>,
    pub cursor: Option<String>,
}

/// The version Nakama gives `value`: the MD5 of its bytes, in hex.
pub fn version_of(value: &str) -> String {
    Md5::digest(value.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The nil id stands for the system; the rest of the API says `None`.
fn owner_of(id: Uuid) -> Option<Uuid> {
    (!id.is_nil()).then_some(id)
}

pub struct Storage {
    store: Arc<dyn StorageStore>,
    config: StorageConfig,
}

impl Storage {
    pub fn new(store: Arc<dyn StorageStore>, config: StorageConfig) -> Storage {
        Storage { store, config }
    }

    /// Checks a collection and key as Nakama does (both set), and bounds them.
    fn check_names(collection: &str, key: &str) -> Result<(), StorageError> {
        if collection.is_empty() || key.is_empty() {
            return Err(StorageError::Invalid(
                "Invalid collection or key value supplied. They must be set.".into(),
            ));
        }
        if collection.len() > MAX_NAME_BYTES || key.len() > MAX_NAME_BYTES {
            return Err(StorageError::Invalid(format!(
                "Invalid collection or key value supplied. They must be at most {MAX_NAME_BYTES} bytes."
            )));
        }
        Ok(())
    }

    fn check_batch(&self, len: usize) -> Result<(), StorageError> {
        if len > self.config.max_objects_per_request {
            return Err(StorageError::Invalid(format!(
                "Too many objects - at most {} per request.",
                self.config.max_objects_per_request
            )));
        }
        Ok(())
    }

    /// Writes every object or none; the acks in the order given.
    pub async fn write(
        &self,
        caller: Caller,
        objects: Vec<WriteObject>,
    ) -> Result<Vec<Ack>, StorageError> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        self.check_batch(objects.len())?;
        let mut writes = Vec::with_capacity(objects.len());
        let mut seen = HashSet::with_capacity(objects.len());
        for object in objects {
            Self::check_names(&object.collection, &object.key)?;
            let read = object.read.unwrap_or(1);
            if !(0..=2).contains(&read) {
                return Err(StorageError::Invalid(
                    "Invalid read permission supplied. It must be either 0, 1 or 2.".into(),
                ));
            }
            let write = object.write.unwrap_or(1);
            if !(0..=1).contains(&write) {
                return Err(StorageError::Invalid(
                    "Invalid write permission supplied. It must be either 0 or 1.".into(),
                ));
            }
            if object.value.len() > self.config.max_value_bytes {
                return Err(StorageError::Invalid(format!(
                    "Value is too large - at most {} bytes.",
                    self.config.max_value_bytes
                )));
            }
            let is_object = serde_json::from_str::<serde_json::Value>(&object.value)
                .is_ok_and(|v| v.is_object());
            if !is_object {
                return Err(StorageError::Invalid("Value must be a JSON object.".into()));
            }
            let owner = match caller {
                Caller::Server => object.owner.unwrap_or(Uuid::nil()),
                Caller::Player(uid) => {
                    if object.owner.is_some_and(|o| o != uid) {
                        return Err(StorageError::PermissionRejected);
                    }
                    uid
                }
            };
            let id = StorageKey {
                collection: object.collection,
                key: object.key,
                owner,
            };
            if !seen.insert(id.clone()) {
                return Err(StorageError::Invalid(format!(
                    "Duplicate object in one write: collection {:?}, key {:?}.",
                    id.collection, id.key
                )));
            }
            let expected = match object.version.as_str() {
                "" => Expected::Any,
                "*" => Expected::Absent,
                version => Expected::Version(version.to_string()),
            };
            writes.push(StorageWrite {
                version: version_of(&object.value),
                id,
                value: object.value,
                read: read as i16,
                write: write as i16,
                expected,
            });
        }
        let owner_limit = match caller {
            Caller::Server => None,
            Caller::Player(_) => Some(self.config.max_objects_per_user),
        };
        let times = self
            .store
            .write_objects(writes.clone(), caller == Caller::Server, owner_limit)
            .await?
            .map_err(|refusal| match refusal {
                StorageRefusal::Version => StorageError::VersionRejected,
                StorageRefusal::Permission => StorageError::PermissionRejected,
                StorageRefusal::NotDeleted => StorageError::DeleteRejected,
                StorageRefusal::TooManyObjects => {
                    StorageError::TooManyObjects(self.config.max_objects_per_user)
                }
            })?;
        Ok(writes
            .into_iter()
            .zip(times)
            .map(
                |(
                    write,
                    StorageTimes {
                        create_time_ms,
                        update_time_ms,
                    },
                )| Ack {
                    owner: owner_of(write.id.owner),
                    collection: write.id.collection,
                    key: write.id.key,
                    version: write.version,
                    create_time_ms,
                    update_time_ms,
                },
            )
            .collect())
    }

    /// The objects of `ids` that exist and the caller may read (in no particular order).
    pub async fn read(
        &self,
        caller: Caller,
        ids: Vec<ObjectId>,
    ) -> Result<Vec<StorageRecord>, StorageError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.check_batch(ids.len())?;
        let mut keys = Vec::with_capacity(ids.len());
        for id in ids {
            Self::check_names(&id.collection, &id.key)?;
            keys.push(StorageKey {
                collection: id.collection,
                key: id.key,
                owner: id.owner.unwrap_or(Uuid::nil()),
            });
        }
        let mut found = self.store.read_objects(keys).await?;
        found.retain(|record| readable(caller, record));
        Ok(found)
    }

    /// A page of `collection`: one owner's objects (`owner`) or everyone's, as far as the caller
    /// may read them. `limit` 1 to [`MAX_LIST_LIMIT`] ([`DEFAULT_LIST_LIMIT`] when `None`).
    pub async fn list(
        &self,
        caller: Caller,
        collection: &str,
        owner: Option<Uuid>,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<Page, StorageError> {
        if collection.is_empty() || collection.len() > MAX_NAME_BYTES {
            return Err(StorageError::Invalid(
                "Invalid collection value supplied. It must be set.".into(),
            ));
        }
        let limit = limit.unwrap_or(DEFAULT_LIST_LIMIT);
        if !(1..=MAX_LIST_LIMIT).contains(&limit) {
            return Err(StorageError::Invalid(format!(
                "Invalid limit - limit must be between 1 and {MAX_LIST_LIMIT}."
            )));
        }
        // What the caller may read decides the permissions listed; the cursor never does.
        let min_read = match caller {
            Caller::Server => 0,
            Caller::Player(uid) if owner == Some(uid) => 1,
            Caller::Player(_) => 2,
        };
        let listing = cursor::Listing {
            collection: collection.to_string(),
            owner,
            min_read,
        };
        let after = match cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(text) => Some(
                listing
                    .position(text)
                    .ok_or_else(|| StorageError::Invalid("Malformed cursor was used.".into()))?,
            ),
        };
        let mut objects = self
            .store
            .list_objects(StorageListing {
                collection: listing.collection.clone(),
                owner: listing.owner,
                min_read,
                after,
                limit: limit + 1,
            })
            .await?;
        let cursor = if objects.len() > limit {
            objects.truncate(limit);
            objects.last().map(|last| listing.cursor_after(last))
        } else {
            None
        };
        Ok(Page { objects, cursor })
    }

    /// A page of `owner`'s objects in every collection, in (collection, key) order: an
    /// operator's view of a player (the console), so every permission is listed.
    pub async fn list_owned(
        &self,
        owner: Uuid,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page, StorageError> {
        let limit = limit.clamp(1, MAX_LIST_LIMIT);
        let after = match cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(text) => Some(
                cursor::owned_position(owner, text)
                    .ok_or_else(|| StorageError::Invalid("Malformed cursor was used.".into()))?,
            ),
        };
        let mut objects = self.store.owner_objects(owner, after, limit + 1).await?;
        let cursor = if objects.len() > limit {
            objects.truncate(limit);
            objects
                .last()
                .map(|last| cursor::owned_cursor_after(owner, last))
        } else {
            None
        };
        Ok(Page { objects, cursor })
    }

    /// Deletes every object or none.
    pub async fn delete(
        &self,
        caller: Caller,
        objects: Vec<DeleteObject>,
    ) -> Result<(), StorageError> {
        if objects.is_empty() {
            return Ok(());
        }
        self.check_batch(objects.len())?;
        let mut deletes = Vec::with_capacity(objects.len());
        let mut seen = HashSet::with_capacity(objects.len());
        for object in objects {
            Self::check_names(&object.collection, &object.key)?;
            let owner = match caller {
                Caller::Server => object.owner.unwrap_or(Uuid::nil()),
                Caller::Player(uid) => uid,
            };
            let id = StorageKey {
                collection: object.collection,
                key: object.key,
                owner,
            };
            if !seen.insert(id.clone()) {
                return Err(StorageError::Invalid(format!(
                    "Duplicate object in one delete: collection {:?}, key {:?}.",
                    id.collection, id.key
                )));
            }
            deletes.push(StorageDelete {
                id,
                version: (!object.version.is_empty()).then_some(object.version),
            });
        }
        self.store
            .delete_objects(deletes, caller == Caller::Server)
            .await?
            .map_err(|_| StorageError::DeleteRejected)
    }
}

/// Whether `caller` may read `record`: the server anything; a player what is public, and their
/// own objects unless only the server may read them.
fn readable(caller: Caller, record: &StorageRecord) -> bool {
    match caller {
        Caller::Server => true,
        Caller::Player(uid) => record.read == 2 || (record.read == 1 && record.id.owner == uid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_md5_in_hex_as_nakama_computes_them() {
        // md5("") and md5("{}") as `md5sum` prints them.
        assert_eq!(version_of(""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(version_of("{}"), "99914b932bd37a50b983c5e7c90ae93b");
    }
}
