//! Storage objects in the store ([`StorageStore`]).

use async_trait::async_trait;
use uuid::Uuid;

use crate::store::StoreError;

/// A storage object's identity: collection, key and owner (the nil id: the system).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageKey {
    pub collection: String,
    pub key: String,
    pub owner: Uuid,
}

/// A stored object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageRecord {
    pub id: StorageKey,
    pub value: String,
    pub version: String,
    pub read: i16,
    pub write: i16,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// What a write expects to find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Anything (last write wins).
    Any,
    /// Nothing: the object must not exist yet.
    Absent,
    /// The object at this version.
    Version(String),
}

/// One object of a storage write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageWrite {
    pub id: StorageKey,
    pub value: String,
    /// The version the value will have.
    pub version: String,
    pub read: i16,
    pub write: i16,
    pub expected: Expected,
}

/// One object of a storage delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageDelete {
    pub id: StorageKey,
    /// Delete only at this version.
    pub version: Option<String>,
}

/// Why a storage write or delete changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageRefusal {
    /// An object was not at the version expected (or existed where none was expected).
    Version,
    /// An object's write permission does not let the caller change it.
    Permission,
    /// A delete found no object to delete (as asked: missing, other version or not writable).
    NotDeleted,
    /// The write would give its owner more objects than the limit.
    TooManyObjects,
}

/// When a written object was created and last updated (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageTimes {
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// Which objects a listing reads: one collection, one owner's or everyone's, from a read
/// permission up, after a position, in (read, key, owner) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageListing {
    pub collection: String,
    pub owner: Option<Uuid>,
    pub min_read: i16,
    /// Where the previous page ended: (read, key, owner).
    pub after: Option<(i16, String, Uuid)>,
    pub limit: usize,
}

/// Storage objects. Each write is durable when its future resolves; a batch is all or nothing.
#[async_trait]
pub trait StorageStore: Send + Sync {
    /// Writes every object of `writes` or none: refused (nothing changed) when one is not as
    /// expected, or, unless `authoritative`, is not writable by its owner (write 1), or when
    /// the objects it creates would give their owner more than `owner_limit` (the objects of
    /// one call have one owner when a limit is given).
    async fn write_objects(
        &self,
        writes: Vec<StorageWrite>,
        authoritative: bool,
        owner_limit: Option<u64>,
    ) -> Result<Result<Vec<StorageTimes>, StorageRefusal>, StoreError>;

    /// The objects of `ids` that exist (in no particular order).
    async fn read_objects(&self, ids: Vec<StorageKey>) -> Result<Vec<StorageRecord>, StoreError>;

    /// A page of objects; see [`StorageListing`].
    async fn list_objects(&self, listing: StorageListing)
        -> Result<Vec<StorageRecord>, StoreError>;

    /// Up to `limit` of `owner`'s objects in every collection, in (collection, key) order after
    /// `after` (an operator's view of a player; a player's objects are bounded by
    /// `storage.max_objects_per_user`).
    async fn owner_objects(
        &self,
        owner: Uuid,
        after: Option<(String, String)>,
        limit: usize,
    ) -> Result<Vec<StorageRecord>, StoreError>;

    /// Deletes every object of `deletes` or none: refused when one is missing, at another
    /// version than given, or (unless `authoritative`) not writable; an authoritative delete
    /// without a version of a missing object is no refusal.
    async fn delete_objects(
        &self,
        deletes: Vec<StorageDelete>,
        authoritative: bool,
    ) -> Result<Result<(), StorageRefusal>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] = &[crate::migration!(
    9,
    "storage_objects",
    "0009_storage_objects"
)];
