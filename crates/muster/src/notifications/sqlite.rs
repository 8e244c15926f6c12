//! Stored notifications on SQLite: inserted through the writer (with each user's oldest beyond
//! the bound deleted in the same transaction), listed by a reader along the `(user_id, seq)`
//! index.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use uuid::Uuid;

use crate::notifications::store::{NotificationRecord, NotificationStore, NotificationUpdate};
use crate::store::sqlite::{db_error, parse_uuid, SqliteStore};
use crate::store::StoreError;

fn insert(
    conn: &Connection,
    records: &[NotificationRecord],
    max_per_user: usize,
) -> Result<(), StoreError> {
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO notifications (id, user_id, subject, content, code, sender_id, create_time_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(db_error)?;
    for r in records {
        insert
            .execute(params![
                r.id.to_string(),
                r.user_id.to_string(),
                r.subject,
                r.content,
                r.code,
                r.sender_id.map(|id| id.to_string()),
                r.create_time_ms
            ])
            .map_err(db_error)?;
    }
    let mut users: Vec<Uuid> = records.iter().map(|r| r.user_id).collect();
    users.sort_unstable();
    users.dedup();
    let mut prune = conn
        .prepare_cached(
            "DELETE FROM notifications WHERE id IN (
                 SELECT id FROM notifications WHERE user_id = ?1
                 ORDER BY seq DESC LIMIT -1 OFFSET ?2)",
        )
        .map_err(db_error)?;
    for user in users {
        prune
            .execute(params![user.to_string(), max_per_user as i64])
            .map_err(db_error)?;
    }
    Ok(())
}

fn list(
    conn: &Connection,
    user_id: Uuid,
    after_seq: i64,
    limit: usize,
) -> Result<Vec<NotificationRecord>, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT seq, id, subject, content, code, sender_id, create_time_ms FROM notifications
             WHERE user_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )
        .map_err(db_error)?;
    let rows = statement
        .query_map(params![user_id.to_string(), after_seq, limit as i64], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i32>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, i64>(6)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(db_error)?;
    rows.into_iter()
        .map(
            |(seq, id, subject, content, code, sender, create_time_ms)| {
                Ok(NotificationRecord {
                    seq,
                    id: parse_uuid(&id)?,
                    user_id,
                    subject,
                    content,
                    code,
                    sender_id: sender.as_deref().map(parse_uuid).transpose()?,
                    create_time_ms,
                })
            },
        )
        .collect()
}

fn by_id(
    conn: &Connection,
    ids: &[Uuid],
    user_id: Option<Uuid>,
) -> Result<Vec<NotificationRecord>, StoreError> {
    let mut statement = conn
        .prepare_cached(
            "SELECT seq, id, user_id, subject, content, code, sender_id, create_time_ms
             FROM notifications WHERE id = ?1 AND (?2 IS NULL OR user_id = ?2)",
        )
        .map_err(db_error)?;
    let user = user_id.map(|u| u.to_string());
    let mut found = Vec::new();
    for id in ids {
        let row = statement
            .query_row(params![id.to_string(), user], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, i32>(5)?,
                    r.get::<_, Option<String>>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })
            .optional()
            .map_err(db_error)?;
        if let Some((seq, id, user, subject, content, code, sender, create_time_ms)) = row {
            found.push(NotificationRecord {
                seq,
                id: parse_uuid(&id)?,
                user_id: parse_uuid(&user)?,
                subject,
                content,
                code,
                sender_id: sender.as_deref().map(parse_uuid).transpose()?,
                create_time_ms,
            });
        }
    }
    Ok(found)
}

#[async_trait]
impl NotificationStore for SqliteStore {
    async fn insert_notifications(
        &self,
        records: Vec<NotificationRecord>,
        max_per_user: usize,
    ) -> Result<(), StoreError> {
        self.write("notification_insert", move |conn| {
            insert(conn, &records, max_per_user)
        })
        .await
    }

    async fn list_notifications(
        &self,
        user_id: Uuid,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<NotificationRecord>, StoreError> {
        self.read("notification_list", move |conn| {
            list(conn, user_id, after_seq, limit)
        })
        .await
    }

    async fn notifications_by_id(
        &self,
        ids: Vec<Uuid>,
        user_id: Option<Uuid>,
    ) -> Result<Vec<NotificationRecord>, StoreError> {
        self.read("notification_by_id", move |conn| by_id(conn, &ids, user_id))
            .await
    }

    async fn delete_notifications_by_id(&self, ids: Vec<Uuid>) -> Result<usize, StoreError> {
        self.write("notification_delete_by_id", move |conn| {
            let mut delete = conn
                .prepare_cached("DELETE FROM notifications WHERE id = ?1")
                .map_err(db_error)?;
            let mut deleted = 0;
            for id in ids {
                deleted += delete.execute([id.to_string()]).map_err(db_error)?;
            }
            Ok(deleted)
        })
        .await
    }

    async fn update_notifications(
        &self,
        updates: Vec<NotificationUpdate>,
    ) -> Result<usize, StoreError> {
        // The writer runs each job in one transaction: all or none.
        self.write("notification_update", move |conn| {
            let mut update = conn
                .prepare_cached(
                    "UPDATE notifications SET subject = coalesce(?2, subject),
                         content = coalesce(?3, content), sender_id = coalesce(?4, sender_id)
                     WHERE id = ?1",
                )
                .map_err(db_error)?;
            let mut found = 0;
            for u in updates {
                found += update
                    .execute(params![
                        u.id.to_string(),
                        u.subject,
                        u.content,
                        u.sender_id.map(|id| id.to_string())
                    ])
                    .map_err(db_error)?;
            }
            Ok(found)
        })
        .await
    }

    async fn delete_notifications(
        &self,
        user_id: Uuid,
        ids: Vec<Uuid>,
    ) -> Result<usize, StoreError> {
        self.write("notification_delete", move |conn| {
            let mut delete = conn
                .prepare_cached("DELETE FROM notifications WHERE id = ?1 AND user_id = ?2")
                .map_err(db_error)?;
            let user = user_id.to_string();
            let mut deleted = 0;
            for id in ids {
                deleted += delete
                    .execute(params![id.to_string(), user])
                    .map_err(db_error)?;
            }
            Ok(deleted)
        })
        .await
    }
}
