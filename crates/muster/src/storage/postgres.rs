//! Storage objects on PostgreSQL. A batch write and a batch delete are each one [`Write`] of the
//! group-commit writers: one statement that locks the objects it touches (`FOR UPDATE`), judges
//! every one of them, and changes them all or none, reporting a refusal as a row.
//!
//! Races the lock cannot see — another transaction creating one of the objects after this
//! statement's snapshot — end in an error (`*` objects are plain inserts: a unique violation) or
//! in fewer rows written than asked (an object that turned out not writable), which the writer
//! treats as the write failing: the batch is rolled back and this write runs again alone, where
//! it sees the winner's row and is refused cleanly. Nothing is ever half written.

use std::time::Instant;

use async_trait::async_trait;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::storage::store::{
    Expected, StorageDelete, StorageKey, StorageListing, StorageRecord, StorageRefusal,
    StorageStore, StorageTimes, StorageWrite,
};
use crate::store::postgres::writer::{key_of, Write};
use crate::store::postgres::{db_error, prepared, PostgresStore};
use crate::store::StoreError;

const COLUMNS: &str =
    "collection, key, user_id, value, version, read, write, create_time_ms, update_time_ms";

fn record(row: &Row) -> StorageRecord {
    StorageRecord {
        id: StorageKey {
            collection: row.get(0),
            key: row.get(1),
            owner: row.get(2),
        },
        value: row.get(3),
        version: row.get(4),
        read: row.get(5),
        write: row.get(6),
        create_time_ms: row.get(7),
        update_time_ms: row.get(8),
    }
}

/// Refusal codes in the statements' rows.
const VERSION: i16 = 1;
const PERMISSION: i16 = 2;
const TOO_MANY: i16 = 3;

/// A batch of objects to write, as columns.
struct WriteObjects {
    collections: Vec<String>,
    keys: Vec<String>,
    owners: Vec<Uuid>,
    values: Vec<String>,
    versions: Vec<String>,
    /// `*` (absent), `` (anything) or the version expected.
    expected: Vec<String>,
    reads: Vec<i16>,
    writes: Vec<i16>,
    authoritative: bool,
    now_ms: i64,
    /// Most objects the (one) owner may have after the write; -1: no limit.
    owner_limit: i64,
}

impl Write for WriteObjects {
    type Output = Result<Vec<StorageTimes>, StorageRefusal>;
    const PATH: &'static str = "storage_write";
    const SQL: &'static str = "
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[],
                         $7::int2[], $8::int2[])
        WITH ORDINALITY AS i(collection, key, user_id, value, version, expected, read, write, n)
), locked AS (
    SELECT s.collection, s.key, s.user_id, s.version, s.write
    FROM storage s JOIN input i
        ON s.collection = i.collection AND s.key = i.key AND s.user_id = i.user_id
    ORDER BY s.collection, s.key, s.user_id
    FOR UPDATE OF s
), verdicts AS (
    SELECT i.n, CASE
        WHEN i.expected = '*' THEN CASE WHEN l.version IS NULL THEN 0 ELSE 1 END
        WHEN l.version IS NULL THEN CASE WHEN i.expected = '' THEN 0 ELSE 1 END
        WHEN NOT $9 AND l.write <> 1 THEN 2
        WHEN i.expected <> '' AND l.version <> i.expected THEN 1
        ELSE 0 END AS refusal
    FROM input i LEFT JOIN locked l
        ON l.collection = i.collection AND l.key = i.key AND l.user_id = i.user_id
), fresh AS (
    SELECT count(*) AS n FROM input i LEFT JOIN locked l
        ON l.collection = i.collection AND l.key = i.key AND l.user_id = i.user_id
    WHERE l.version IS NULL
), refused AS (
    SELECT refusal FROM (
        SELECT refusal, n FROM verdicts WHERE refusal > 0
        UNION ALL
        SELECT 3, 9223372036854775807 FROM fresh
        WHERE $11 >= 0 AND fresh.n > 0
          AND (SELECT count(*) FROM storage WHERE user_id = ($3::uuid[])[1]) + fresh.n > $11
    ) AS r ORDER BY n LIMIT 1
), created AS (
    INSERT INTO storage (collection, key, user_id, value, version, read, write,
                         create_time_ms, update_time_ms)
    SELECT collection, key, user_id, value, version, read, write, $10, $10 FROM input
    WHERE expected = '*' AND NOT EXISTS (SELECT 1 FROM refused)
    RETURNING collection, key, user_id, create_time_ms, update_time_ms
), upserted AS (
    INSERT INTO storage (collection, key, user_id, value, version, read, write,
                         create_time_ms, update_time_ms)
    SELECT collection, key, user_id, value, version, read, write, $10, $10 FROM input
    WHERE expected <> '*' AND NOT EXISTS (SELECT 1 FROM refused)
    ON CONFLICT (collection, key, user_id) DO UPDATE SET
        value = EXCLUDED.value, version = EXCLUDED.version, read = EXCLUDED.read,
        write = EXCLUDED.write, update_time_ms = EXCLUDED.update_time_ms
    WHERE $9 OR storage.write = 1
    RETURNING collection, key, user_id, create_time_ms, update_time_ms
)
SELECT 0::int2, i.n, w.create_time_ms, w.update_time_ms
FROM input i JOIN (SELECT * FROM created UNION ALL SELECT * FROM upserted) w
    ON w.collection = i.collection AND w.key = i.key AND w.user_id = i.user_id
UNION ALL
SELECT refusal::int2, 0, 0, 0 FROM refused";
    const TYPES: &'static [Type] = &[
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::UUID_ARRAY,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT2_ARRAY,
        Type::INT2_ARRAY,
        Type::BOOL,
        Type::INT8,
        Type::INT8,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.collections,
            &self.keys,
            &self.owners,
            &self.values,
            &self.versions,
            &self.expected,
            &self.reads,
            &self.writes,
            &self.authoritative,
            &self.now_ms,
            &self.owner_limit,
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Self::Output, StoreError> {
        let mut times = vec![None; self.keys.len()];
        for row in &rows {
            match row.get::<_, i16>(0) {
                VERSION => return Ok(Err(StorageRefusal::Version)),
                PERMISSION => return Ok(Err(StorageRefusal::Permission)),
                TOO_MANY => return Ok(Err(StorageRefusal::TooManyObjects)),
                _ => {}
            }
            let n: i64 = row.get(1);
            if let Some(slot) = usize::try_from(n - 1).ok().and_then(|i| times.get_mut(i)) {
                *slot = Some(StorageTimes {
                    create_time_ms: row.get(2),
                    update_time_ms: row.get(3),
                });
            }
        }
        // An object another transaction made unwritable after this one looked: run again
        // alone (see the module documentation).
        times
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .map(Ok)
            .ok_or_else(|| StoreError::Database("a storage write raced another".into()))
    }
}

/// A batch of objects to delete, as columns.
struct DeleteObjects {
    collections: Vec<String>,
    keys: Vec<String>,
    owners: Vec<Uuid>,
    /// `` for any version.
    versions: Vec<String>,
    authoritative: bool,
}

impl Write for DeleteObjects {
    type Output = Result<(), StorageRefusal>;
    const PATH: &'static str = "storage_delete";
    const SQL: &'static str = "
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[])
        AS i(collection, key, user_id, version)
), locked AS (
    SELECT s.collection, s.key, s.user_id, s.version, s.write
    FROM storage s JOIN input i
        ON s.collection = i.collection AND s.key = i.key AND s.user_id = i.user_id
    ORDER BY s.collection, s.key, s.user_id
    FOR UPDATE OF s
), refused AS (
    SELECT 1 FROM input i LEFT JOIN locked l
        ON l.collection = i.collection AND l.key = i.key AND l.user_id = i.user_id
    WHERE CASE
        WHEN l.version IS NULL THEN NOT ($5 AND i.version = '')
        WHEN NOT $5 AND l.write = 0 THEN TRUE
        ELSE i.version <> '' AND l.version <> i.version END
    LIMIT 1
), deleted AS (
    DELETE FROM storage s USING input i
    WHERE s.collection = i.collection AND s.key = i.key AND s.user_id = i.user_id
      AND NOT EXISTS (SELECT 1 FROM refused)
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM refused), (SELECT count(*) FROM deleted)";
    const TYPES: &'static [Type] = &[
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::UUID_ARRAY,
        Type::TEXT_ARRAY,
        Type::BOOL,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.collections,
            &self.keys,
            &self.owners,
            &self.versions,
            &self.authoritative,
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Self::Output, StoreError> {
        let refused = rows.first().is_some_and(|r| r.get::<_, bool>(0));
        Ok(if refused {
            Err(StorageRefusal::NotDeleted)
        } else {
            Ok(())
        })
    }
}

#[async_trait]
impl StorageStore for PostgresStore {
    async fn write_objects(
        &self,
        writes: Vec<StorageWrite>,
        authoritative: bool,
        owner_limit: Option<u64>,
    ) -> Result<Result<Vec<StorageTimes>, StorageRefusal>, StoreError> {
        let Some(first) = writes.first() else {
            return Ok(Ok(Vec::new()));
        };
        // One owner's writes take one writer: they commit in the order they came.
        let key = key_of(first.id.owner);
        let mut batch = WriteObjects {
            collections: Vec::with_capacity(writes.len()),
            keys: Vec::with_capacity(writes.len()),
            owners: Vec::with_capacity(writes.len()),
            values: Vec::with_capacity(writes.len()),
            versions: Vec::with_capacity(writes.len()),
            expected: Vec::with_capacity(writes.len()),
            reads: Vec::with_capacity(writes.len()),
            writes: Vec::with_capacity(writes.len()),
            authoritative,
            now_ms: crate::base::clock::now_ms(),
            owner_limit: owner_limit.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX)),
        };
        for write in writes {
            batch.collections.push(write.id.collection);
            batch.keys.push(write.id.key);
            batch.owners.push(write.id.owner);
            batch.values.push(write.value);
            batch.versions.push(write.version);
            batch.expected.push(match write.expected {
                Expected::Any => String::new(),
                Expected::Absent => "*".into(),
                Expected::Version(version) => version,
            });
            batch.reads.push(write.read);
            batch.writes.push(write.write);
        }
        self.writers.write(key, batch).await
    }

    async fn read_objects(&self, ids: Vec<StorageKey>) -> Result<Vec<StorageRecord>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let collections: Vec<&str> = ids.iter().map(|i| i.collection.as_str()).collect();
        let keys: Vec<&str> = ids.iter().map(|i| i.key.as_str()).collect();
        let owners: Vec<Uuid> = ids.iter().map(|i| i.owner).collect();
        let statement = prepared(
            &client,
            &format!(
                "SELECT {COLUMNS} FROM storage NATURAL JOIN
                     unnest($1::text[], $2::text[], $3::uuid[]) AS i(collection, key, user_id)"
            ),
        )
        .await?;
        let rows = client
            .query(&statement, &[&collections, &keys, &owners])
            .await
            .map_err(db_error)?;
        self.metrics.observe_db("storage_read", started.elapsed());
        Ok(rows.iter().map(record).collect())
    }

    async fn list_objects(
        &self,
        listing: StorageListing,
    ) -> Result<Vec<StorageRecord>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let (after_read, after_key, after_owner) = match &listing.after {
            Some((read, key, owner)) => (*read, key.clone(), *owner),
            None => (-1, String::new(), Uuid::nil()),
        };
        let limit = i64::try_from(listing.limit).unwrap_or(i64::MAX);
        // Keys compare byte by byte (COLLATE "C"), as the indexes and SQLite order them.
        let order = "(read, key COLLATE \"C\", user_id) > ($4, $5 COLLATE \"C\", $6)
             ORDER BY read, key COLLATE \"C\", user_id LIMIT $7";
        let rows = match listing.owner {
            Some(owner) => {
                let statement = prepared(
                    &client,
                    &format!(
                        "SELECT {COLUMNS} FROM storage
                         WHERE collection = $1 AND user_id = $2 AND read >= $3 AND {order}"
                    ),
                )
                .await?;
                let args: [&(dyn ToSql + Sync); 7] = [
                    &listing.collection,
                    &owner,
                    &listing.min_read,
                    &after_read,
                    &after_key,
                    &after_owner,
                    &limit,
                ];
                client.query(&statement, &args).await
            }
            None => {
                let statement = prepared(
                    &client,
                    &format!(
                        "SELECT {COLUMNS} FROM storage
                         WHERE collection = $1 AND $2::uuid IS NULL AND read >= $3 AND {order}"
                    ),
                )
                .await?;
                let args: [&(dyn ToSql + Sync); 7] = [
                    &listing.collection,
                    &None::<Uuid>,
                    &listing.min_read,
                    &after_read,
                    &after_key,
                    &after_owner,
                    &limit,
                ];
                client.query(&statement, &args).await
            }
        }
        .map_err(db_error)?;
        self.metrics.observe_db("storage_list", started.elapsed());
        Ok(rows.iter().map(record).collect())
    }

    async fn owner_objects(
        &self,
        owner: Uuid,
        after: Option<(String, String)>,
        limit: usize,
    ) -> Result<Vec<StorageRecord>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let (collection, key) = after.unwrap_or_default();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let statement = prepared(
            &client,
            &format!(
                "SELECT {COLUMNS} FROM storage
                 WHERE user_id = $1
                   AND (collection COLLATE \"C\", key COLLATE \"C\") > ($2 COLLATE \"C\", $3 COLLATE \"C\")
                 ORDER BY collection COLLATE \"C\", key COLLATE \"C\" LIMIT $4"
            ),
        )
        .await?;
        let rows = client
            .query(&statement, &[&owner, &collection, &key, &limit])
            .await
            .map_err(db_error)?;
        self.metrics
            .observe_db("storage_owner_objects", started.elapsed());
        Ok(rows.iter().map(record).collect())
    }

    async fn delete_objects(
        &self,
        deletes: Vec<StorageDelete>,
        authoritative: bool,
    ) -> Result<Result<(), StorageRefusal>, StoreError> {
        let Some(first) = deletes.first() else {
            return Ok(Ok(()));
        };
        let key = key_of(first.id.owner);
        let mut batch = DeleteObjects {
            collections: Vec::with_capacity(deletes.len()),
            keys: Vec::with_capacity(deletes.len()),
            owners: Vec::with_capacity(deletes.len()),
            versions: Vec::with_capacity(deletes.len()),
            authoritative,
        };
        for delete in deletes {
            batch.collections.push(delete.id.collection);
            batch.keys.push(delete.id.key);
            batch.owners.push(delete.id.owner);
            batch.versions.push(delete.version.unwrap_or_default());
        }
        self.writers.write(key, batch).await
    }
}
