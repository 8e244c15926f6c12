//! Storage objects on SQLite. A batch write or delete is one job of the group-commit writer, the
//! only writer there is: it reads what it must check, refuses before changing anything, then
//! writes every object, all inside its own savepoint, so a batch is all or nothing and no other
//! write comes between its checks and its changes.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, Row};

use crate::storage::store::{
    Expected, StorageDelete, StorageKey, StorageListing, StorageRecord, StorageRefusal,
    StorageStore, StorageTimes, StorageWrite,
};
use crate::store::sqlite::{db_error, parse_uuid, SqliteStore};
use crate::store::StoreError;

const COLUMNS: &str =
    "collection, key, user_id, value, version, read, write, create_time_ms, update_time_ms";

fn record(row: &Row) -> rusqlite::Result<(StorageRecord, String)> {
    let owner: String = row.get(2)?;
    let record = StorageRecord {
        id: StorageKey {
            collection: row.get(0)?,
            key: row.get(1)?,
            owner: uuid::Uuid::nil(),
        },
        value: row.get(3)?,
        version: row.get(4)?,
        read: row.get(5)?,
        write: row.get(6)?,
        create_time_ms: row.get(7)?,
        update_time_ms: row.get(8)?,
    };
    Ok((record, owner))
}

/// Rows read as records, their owners parsed.
fn records(rows: Vec<(StorageRecord, String)>) -> Result<Vec<StorageRecord>, StoreError> {
    rows.into_iter()
        .map(|(mut record, owner)| {
            record.id.owner = parse_uuid(&owner)?;
            Ok(record)
        })
        .collect()
}

/// The version, write permission and creation time of the object at `id`, if any.
fn current(conn: &Connection, id: &StorageKey) -> Result<Option<(String, i16, i64)>, StoreError> {
    conn.prepare_cached(
        "SELECT version, write, create_time_ms FROM storage
         WHERE collection = ?1 AND key = ?2 AND user_id = ?3",
    )
    .and_then(|mut s| {
        s.query_row(params![id.collection, id.key, id.owner.to_string()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()
    })
    .map_err(db_error)
}

/// Why `write` may not be applied over `found`, if it may not.
fn refusal(
    write: &StorageWrite,
    found: Option<&(String, i16, i64)>,
    authoritative: bool,
) -> Option<StorageRefusal> {
    match (&write.expected, found) {
        (Expected::Absent, Some(_)) => Some(StorageRefusal::Version),
        (Expected::Absent, None) | (Expected::Any, None) => None,
        (Expected::Version(_), None) => Some(StorageRefusal::Version),
        (_, Some((_, writable, _))) if !authoritative && *writable != 1 => {
            Some(StorageRefusal::Permission)
        }
        (Expected::Version(expected), Some((version, _, _))) if expected != version => {
            Some(StorageRefusal::Version)
        }
        _ => None,
    }
}

/// How many objects `owner` has.
fn owned(conn: &Connection, owner: &uuid::Uuid) -> Result<u64, StoreError> {
    conn.prepare_cached("SELECT count(*) FROM storage WHERE user_id = ?1")
        .and_then(|mut s| s.query_row(params![owner.to_string()], |r| r.get::<_, i64>(0)))
        .map(|n| n.max(0) as u64)
        .map_err(db_error)
}

fn write_objects(
    conn: &Connection,
    writes: &[StorageWrite],
    authoritative: bool,
    owner_limit: Option<u64>,
    now_ms: i64,
) -> Result<Result<Vec<StorageTimes>, StorageRefusal>, StoreError> {
    let mut found = Vec::with_capacity(writes.len());
    for write in writes {
        let current = current(conn, &write.id)?;
        if let Some(refused) = refusal(write, current.as_ref(), authoritative) {
            return Ok(Err(refused));
        }
        found.push(current);
    }
    let created = found.iter().filter(|f| f.is_none()).count() as u64;
    if let (Some(limit), Some(first)) = (owner_limit, writes.first()) {
        if created > 0 && owned(conn, &first.id.owner)? + created > limit {
            return Ok(Err(StorageRefusal::TooManyObjects));
        }
    }
    let mut upsert = conn
        .prepare_cached(
            "INSERT INTO storage (collection, key, user_id, value, version, read, write,
                                  create_time_ms, update_time_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8)
             ON CONFLICT (collection, key, user_id) DO UPDATE SET
                 value = excluded.value, version = excluded.version, read = excluded.read,
                 write = excluded.write, update_time_ms = excluded.update_time_ms",
        )
        .map_err(db_error)?;
    let mut times = Vec::with_capacity(writes.len());
    for (write, current) in writes.iter().zip(found) {
        upsert
            .execute(params![
                write.id.collection,
                write.id.key,
                write.id.owner.to_string(),
                write.value,
                write.version,
                write.read,
                write.write,
                now_ms
            ])
            .map_err(db_error)?;
        times.push(StorageTimes {
            create_time_ms: current.map_or(now_ms, |(_, _, created)| created),
            update_time_ms: now_ms,
        });
    }
    Ok(Ok(times))
}

fn delete_objects(
    conn: &Connection,
    deletes: &[StorageDelete],
    authoritative: bool,
) -> Result<Result<(), StorageRefusal>, StoreError> {
    let mut doomed = Vec::with_capacity(deletes.len());
    for delete in deletes {
        let deletable = current(conn, &delete.id)?.is_some_and(|(version, writable, _)| {
            (authoritative || writable > 0) && delete.version.as_ref().is_none_or(|v| *v == version)
        });
        match deletable {
            true => doomed.push(&delete.id),
            // The server deleting what is not there, with no version asked: nothing to do.
            false if authoritative && delete.version.is_none() => {}
            false => return Ok(Err(StorageRefusal::NotDeleted)),
        }
    }
    let mut remove = conn
        .prepare_cached("DELETE FROM storage WHERE collection = ?1 AND key = ?2 AND user_id = ?3")
        .map_err(db_error)?;
    for id in doomed {
        remove
            .execute(params![id.collection, id.key, id.owner.to_string()])
            .map_err(db_error)?;
    }
    Ok(Ok(()))
}

fn read_objects(conn: &Connection, ids: &[StorageKey]) -> Result<Vec<StorageRecord>, StoreError> {
    let mut select = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM storage WHERE collection = ?1 AND key = ?2 AND user_id = ?3"
        ))
        .map_err(db_error)?;
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(row) = select
            .query_row(params![id.collection, id.key, id.owner.to_string()], record)
            .optional()
            .map_err(db_error)?
        {
            rows.push(row);
        }
    }
    records(rows)
}

fn list_objects(
    conn: &Connection,
    listing: &StorageListing,
) -> Result<Vec<StorageRecord>, StoreError> {
    let (after_read, after_key, after_owner) = match &listing.after {
        Some((read, key, owner)) => (i64::from(*read), key.clone(), owner.to_string()),
        None => (-1, String::new(), String::new()),
    };
    let limit = i64::try_from(listing.limit).unwrap_or(i64::MAX);
    // One owner's objects are read through the index that starts with the owner; everyone's
    // through the one in listing order.
    let (sql, owner) = match listing.owner {
        Some(owner) => (
            "WHERE collection = ?1 AND user_id = ?2 AND read >= ?3
               AND (read, key, user_id) > (?4, ?5, ?6)",
            owner.to_string(),
        ),
        None => (
            "WHERE collection = ?1 AND ?2 = '' AND read >= ?3
               AND (read, key, user_id) > (?4, ?5, ?6)",
            String::new(),
        ),
    };
    let rows = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM storage {sql} ORDER BY read, key, user_id LIMIT ?7"
        ))
        .and_then(|mut s| {
            let args = params![
                listing.collection,
                owner,
                listing.min_read,
                after_read,
                after_key,
                after_owner,
                limit
            ];
            s.query_map(args, record)
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        })
        .map_err(db_error)?;
    records(rows)
}

#[async_trait]
impl StorageStore for SqliteStore {
    async fn write_objects(
        &self,
        writes: Vec<StorageWrite>,
        authoritative: bool,
        owner_limit: Option<u64>,
    ) -> Result<Result<Vec<StorageTimes>, StorageRefusal>, StoreError> {
        let now_ms = crate::base::clock::now_ms();
        self.write("storage_write", move |conn| {
            write_objects(conn, &writes, authoritative, owner_limit, now_ms)
        })
        .await
    }

    async fn read_objects(&self, ids: Vec<StorageKey>) -> Result<Vec<StorageRecord>, StoreError> {
        self.read("storage_read", move |conn| read_objects(conn, &ids))
            .await
    }

    async fn list_objects(
        &self,
        listing: StorageListing,
    ) -> Result<Vec<StorageRecord>, StoreError> {
        self.read("storage_list", move |conn| list_objects(conn, &listing))
            .await
    }

    async fn owner_objects(
        &self,
        owner: uuid::Uuid,
        after: Option<(String, String)>,
        limit: usize,
    ) -> Result<Vec<StorageRecord>, StoreError> {
        self.read("storage_owner_objects", move |conn| {
            let (collection, key) = after.unwrap_or_default();
            let rows = conn
                .prepare_cached(&format!(
                    "SELECT {COLUMNS} FROM storage
                     WHERE user_id = ?1 AND (collection, key) > (?2, ?3)
                     ORDER BY collection, key LIMIT ?4"
                ))
                .and_then(|mut s| {
                    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                    s.query_map(params![owner.to_string(), collection, key, limit], record)
                        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                })
                .map_err(db_error)?;
            records(rows)
        })
        .await
    }

    async fn delete_objects(
        &self,
        deletes: Vec<StorageDelete>,
        authoritative: bool,
    ) -> Result<Result<(), StorageRefusal>, StoreError> {
        self.write("storage_delete", move |conn| {
            delete_objects(conn, &deletes, authoritative)
        })
        .await
    }
}
