//! Stored notifications on PostgreSQL. One send's notifications are one batched [`Write`] (many
//! sends share one transaction and one fsync); the same statement deletes each recipient's
//! oldest beyond the bound. Listing reads the `(user_id, seq)` index.

use async_trait::async_trait;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use super::writer::{key_of, Write};
use super::{db_error, prepared, PostgresStore};
use crate::store::{NotificationRecord, NotificationStore, StoreError};

/// New notifications (any users'), one statement: all are stored or none (a missing user fails
/// it). `$1`..`$7`: ids, users, subjects, contents, codes, senders, times; `$8` the bound per
/// user. The prune sees the table before the insert (one snapshot), so it keeps, of each user's
/// older notifications, the bound less that user's new ones.
struct InsertNotifications {
    ids: Vec<Uuid>,
    users: Vec<Uuid>,
    subjects: Vec<String>,
    contents: Vec<String>,
    codes: Vec<i32>,
    senders: Vec<Option<Uuid>>,
    times: Vec<i64>,
    max_per_user: i64,
}

impl Write for InsertNotifications {
    type Output = ();
    const PATH: &'static str = "notification_insert";
    const SQL: &'static str = "
WITH new AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int4[], $6::uuid[], $7::int8[])
        AS n (id, user_id, subject, content, code, sender_id, create_time_ms)
), inserted AS (
    INSERT INTO notifications (id, user_id, subject, content, code, sender_id, create_time_ms)
    SELECT id, user_id, subject, content, code, sender_id, create_time_ms FROM new
    RETURNING 1
), keep AS (
    SELECT user_id, $8 - count(*) AS older FROM new GROUP BY user_id
), ranked AS (
    SELECT n.id, k.older, row_number() OVER (
        PARTITION BY n.user_id ORDER BY n.seq DESC) AS place
    FROM notifications n JOIN keep k ON k.user_id = n.user_id
), pruned AS (
    DELETE FROM notifications WHERE id IN (SELECT id FROM ranked WHERE place > older)
    RETURNING 1
)
SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM pruned)";
    const TYPES: &'static [Type] = &[
        Type::UUID_ARRAY,
        Type::UUID_ARRAY,
        Type::TEXT_ARRAY,
        Type::TEXT_ARRAY,
        Type::INT4_ARRAY,
        Type::UUID_ARRAY,
        Type::INT8_ARRAY,
        Type::INT8,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.ids,
            &self.users,
            &self.subjects,
            &self.contents,
            &self.codes,
            &self.senders,
            &self.times,
            &self.max_per_user,
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
        seq: row.get(6),
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
        let Some(first) = records.first() else {
            return Ok(());
        };
        let key = key_of(first.user_id);
        let write = InsertNotifications {
            ids: records.iter().map(|r| r.id).collect(),
            users: records.iter().map(|r| r.user_id).collect(),
            subjects: records.iter().map(|r| r.subject.clone()).collect(),
            contents: records.iter().map(|r| r.content.clone()).collect(),
            codes: records.iter().map(|r| r.code).collect(),
            senders: records.iter().map(|r| r.sender_id).collect(),
            times: records.iter().map(|r| r.create_time_ms).collect(),
            max_per_user: max_per_user as i64,
        };
        self.writers.write(key, write).await
    }

    async fn list_notifications(
        &self,
        user_id: Uuid,
        after_seq: i64,
        limit: usize,
    ) -> Result<Vec<NotificationRecord>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT id, subject, content, code, sender_id, create_time_ms, seq FROM notifications
             WHERE user_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .await?;
        let rows = client
            .query(&statement, &[&user_id, &after_seq, &(limit as i64)])
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
