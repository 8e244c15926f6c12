//! Stored notifications on PostgreSQL. A user's new notifications are one batched [`Write`]
//! (many users' share one transaction and one fsync); the same statement deletes that user's
//! oldest beyond the bound. Listing reads the `(user_id, create_time_ms, id)` index.

use async_trait::async_trait;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use super::writer::{key_of, Write};
use super::{db_error, prepared, PostgresStore};
use crate::store::{NotificationRecord, NotificationStore, StoreError};

/// One user's new notifications. `$1`..`$6`: ids, subjects, contents, codes, senders, times;
/// `$7` the user; `$8` how many of the user's older ones to keep. The delete sees the table
/// before the insert (one snapshot), so it keeps `max - new` of them.
struct InsertNotifications {
    user_id: Uuid,
    ids: Vec<Uuid>,
    subjects: Vec<String>,
    contents: Vec<String>,
    codes: Vec<i32>,
    senders: Vec<Option<Uuid>>,
    times: Vec<i64>,
    keep_older: i64,
}

impl Write for InsertNotifications {
    type Output = ();
    const PATH: &'static str = "notification_insert";
    const SQL: &'static str = "
WITH inserted AS (
    INSERT INTO notifications (id, user_id, subject, content, code, sender_id, create_time_ms)
    SELECT id, $7, subject, content, code, sender_id, create_time_ms
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int4[], $5::uuid[], $6::int8[])
        AS n (id, subject, content, code, sender_id, create_time_ms)
    RETURNING 1
), pruned AS (
    DELETE FROM notifications WHERE id IN (
        SELECT id FROM notifications WHERE user_id = $7
        ORDER BY create_time_ms DESC, id DESC OFFSET $8)
    RETURNING 1
)
SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM pruned)";
    const TYPES: &'static [Type] = &[
        Type::UUID_ARRAY,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT4_ARRAY,
        Type::UUID_ARRAY,
        Type::INT8_ARRAY,
        Type::UUID,
        Type::INT8,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.ids,
            &self.subjects,
            &self.contents,
            &self.codes,
            &self.senders,
            &self.times,
            &self.user_id,
            &self.keep_older,
        ]
    }

    fn outcome(&self, _rows: Vec<Row>) -> Result<(), StoreError> {
        Ok(())
    }

    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        // A user who does not exist stays missing.
        error.code() != Some(&SqlState::FOREIGN_KEY_VIOLATION) && super::writer::is_retryable(error)
    }
}

fn record_from(user_id: Uuid, row: &Row) -> NotificationRecord {
    NotificationRecord {
        id: row.get(0),
        user_id,
        subject: row.get(1),
        content: row.get(2),
        code: row.get(3),
        sender_id: row.get(4),
        create_time_ms: row.get(5),
    }
}

#[async_trait]
impl NotificationStore for PostgresStore {
    async fn insert_notifications(
        &self,
        records: Vec<NotificationRecord>,
        max_per_user: usize,
    ) -> Result<(), StoreError> {
        let mut by_user: std::collections::BTreeMap<Uuid, Vec<NotificationRecord>> =
            std::collections::BTreeMap::new();
        for record in records {
            by_user.entry(record.user_id).or_default().push(record);
        }
        let writes = by_user.into_iter().map(|(user_id, records)| {
            let keep_older = max_per_user.saturating_sub(records.len()) as i64;
            let write = InsertNotifications {
                user_id,
                ids: records.iter().map(|r| r.id).collect(),
                subjects: records.iter().map(|r| r.subject.clone()).collect(),
                contents: records.iter().map(|r| r.content.clone()).collect(),
                codes: records.iter().map(|r| r.code).collect(),
                senders: records.iter().map(|r| r.sender_id).collect(),
                times: records.iter().map(|r| r.create_time_ms).collect(),
                keep_older,
            };
            self.writers.write(key_of(user_id), write)
        });
        for result in futures_util::future::join_all(writes).await {
            result?;
        }
        Ok(())
    }

    async fn list_notifications(
        &self,
        user_id: Uuid,
        after: Option<(i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<NotificationRecord>, StoreError> {
        let client = self.client().await?;
        let (after_ms, after_id) = after.unwrap_or((i64::MIN, Uuid::nil()));
        let statement = prepared(
            &client,
            "SELECT id, subject, content, code, sender_id, create_time_ms FROM notifications
             WHERE user_id = $1 AND (create_time_ms, id) > ($2, $3)
             ORDER BY create_time_ms, id LIMIT $4",
        )
        .await?;
        let rows = client
            .query(
                &statement,
                &[&user_id, &after_ms, &after_id, &(limit as i64)],
            )
            .await
            .map_err(db_error)?;
        Ok(rows.iter().map(|row| record_from(user_id, row)).collect())
    }

    async fn delete_notifications(
        &self,
        user_id: Uuid,
        ids: Vec<Uuid>,
    ) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "DELETE FROM notifications WHERE user_id = $1 AND id = ANY($2)",
        )
        .await?;
        let deleted = client
            .execute(&statement, &[&user_id, &ids])
            .await
            .map_err(db_error)?;
        Ok(deleted as usize)
    }
}
