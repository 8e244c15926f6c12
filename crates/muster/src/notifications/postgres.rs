//! Stored notifications on PostgreSQL. One send's notifications are one job of the group-commit
//! writer ([`NotificationBatch`]); the sends queued together on one writer join one statement
//! (one insert of all their rows, one transaction, one fsync), which also deletes each
//! recipient's oldest beyond the bound. Listing reads the `(user_id, seq)` index.

use std::any::Any;

use async_trait::async_trait;
use tokio::sync::oneshot;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::notifications::store::{NotificationRecord, NotificationStore, NotificationUpdate};
use crate::store::postgres::writer::{key_of, Job, Write};
use crate::store::postgres::{db_error, db_error_ref, prepared, PostgresStore};
use crate::store::StoreError;

/// New notifications (any users'), one statement: all are stored or none (a missing user fails
/// it). `$1`..`$7`: ids, users, subjects, contents, codes, senders, times; `$8` the bound per
/// user. The prune sees the table before the insert (one snapshot), so it keeps, of each user's
/// older notifications, the bound less that user's new ones; of a user's new ones, only the
/// newest `$8` are stored (the older would be pruned by the next send anyway). A missing user
/// still fails the statement: a user's newest row is always inserted.
#[derive(Default)]
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
WITH given AS (
    SELECT n.*, row_number() OVER (PARTITION BY n.user_id ORDER BY n.ord DESC) AS newest
    FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int4[], $6::uuid[], $7::int8[])
        WITH ORDINALITY AS n (id, user_id, subject, content, code, sender_id, create_time_ms, ord)
), new AS (
    SELECT * FROM given WHERE newest <= $8
), inserted AS (
    INSERT INTO notifications (id, user_id, subject, content, code, sender_id, create_time_ms)
    SELECT id, user_id, subject, content, code, sender_id, create_time_ms FROM new ORDER BY ord
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
        error.code() != Some(&SqlState::FOREIGN_KEY_VIOLATION)
            && crate::store::postgres::writer::is_retryable(error)
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

/// Most notifications one statement stores (sends join it while they fit).
const MAX_ROWS_PER_STATEMENT: usize = 1000;

/// One send waiting for its answer, and where its rows sit in the batch's columns.
struct Send {
    rows: std::ops::Range<usize>,
    answer: oneshot::Sender<Result<(), StoreError>>,
}

/// Sends stored by one statement; see the module documentation.
struct NotificationBatch {
    columns: InsertNotifications,
    sends: Vec<Send>,
    done: bool,
}

impl NotificationBatch {
    fn of(
        records: &[NotificationRecord],
        max_per_user: usize,
    ) -> (
        Box<NotificationBatch>,
        oneshot::Receiver<Result<(), StoreError>>,
    ) {
        let (answer, answered) = oneshot::channel();
        let mut batch = Box::new(NotificationBatch {
            columns: InsertNotifications {
                max_per_user: max_per_user as i64,
                ..Default::default()
            },
            sends: Vec::with_capacity(1),
            done: false,
        });
        let c = &mut batch.columns;
        for r in records {
            c.ids.push(r.id);
            c.users.push(r.user_id);
            c.subjects.push(r.subject.clone());
            c.contents.push(r.content.clone());
            c.codes.push(r.code);
            c.senders.push(r.sender_id);
            c.times.push(r.create_time_ms);
        }
        batch.sends.push(Send {
            rows: 0..records.len(),
            answer,
        });
        (batch, answered)
    }
}

/// The rows of `range` of `columns` as a batch of their own, answering `answer`.
fn part(
    columns: &InsertNotifications,
    range: std::ops::Range<usize>,
    answer: oneshot::Sender<Result<(), StoreError>>,
) -> Box<NotificationBatch> {
    let c = columns;
    let r = range.clone();
    Box::new(NotificationBatch {
        columns: InsertNotifications {
            ids: c.ids[r.clone()].to_vec(),
            users: c.users[r.clone()].to_vec(),
            subjects: c.subjects[r.clone()].to_vec(),
            contents: c.contents[r.clone()].to_vec(),
            codes: c.codes[r.clone()].to_vec(),
            senders: c.senders[r.clone()].to_vec(),
            times: c.times[r].to_vec(),
            max_per_user: c.max_per_user,
        },
        sends: vec![Send {
            rows: 0..range.len(),
            answer,
        }],
        done: false,
    })
}

impl Job for NotificationBatch {
    fn sql(&self) -> (&'static str, &'static [Type]) {
        (InsertNotifications::SQL, InsertNotifications::TYPES)
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.columns.params()
    }

    fn take(&mut self, _rows: Vec<Row>) -> Result<(), StoreError> {
        self.done = true;
        Ok(())
    }

    fn error(&self, error: &tokio_postgres::Error) -> StoreError {
        db_error_ref(error)
    }

    fn retryable(&self, error: &tokio_postgres::Error) -> bool {
        self.columns.retryable(error)
    }

    fn answer(self: Box<Self>, error: Option<StoreError>) {
        for send in self.sends {
            let result = match (&error, self.done) {
                (Some(error), _) => Err(error.clone()),
                (None, true) => Ok(()),
                (None, false) => Err(StoreError::Database(
                    "notification insert was not run".into(),
                )),
            };
            let _ = send.answer.send(result);
        }
    }

    /// Any other send joins while the statement stays within [`MAX_ROWS_PER_STATEMENT`]: every
    /// send only inserts, and the prune counts each user's new rows together, so storing them
    /// in one statement leaves what storing them one after the other would.
    fn absorb(&mut self, next: Box<dyn Job>) -> Result<(), Box<dyn Job>> {
        let joins = next
            .as_any()
            .downcast_ref::<NotificationBatch>()
            .is_some_and(|other| {
                other.columns.max_per_user == self.columns.max_per_user
                    && self.columns.ids.len() + other.columns.ids.len() <= MAX_ROWS_PER_STATEMENT
            });
        if !joins {
            return Err(next);
        }
        let Ok(other) = next.into_any().downcast::<NotificationBatch>() else {
            unreachable!("checked above");
        };
        let other = *other;
        let offset = self.columns.ids.len();
        let c = &mut self.columns;
        let o = other.columns;
        c.ids.extend(o.ids);
        c.users.extend(o.users);
        c.subjects.extend(o.subjects);
        c.contents.extend(o.contents);
        c.codes.extend(o.codes);
        c.senders.extend(o.senders);
        c.times.extend(o.times);
        for send in other.sends {
            self.sends.push(Send {
                rows: send.rows.start + offset..send.rows.end + offset,
                answer: send.answer,
            });
        }
        Ok(())
    }

    fn split(self: Box<Self>) -> Vec<Box<dyn Job>> {
        if self.sends.len() == 1 {
            return vec![self];
        }
        let NotificationBatch { columns, sends, .. } = *self;
        sends
            .into_iter()
            .map(|send| part(&columns, send.rows, send.answer) as Box<dyn Job>)
            .collect()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
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
        let (batch, answered) = NotificationBatch::of(&records, max_per_user);
        self.writers.submit(key, batch).await?;
        answered.await.map_err(|_| StoreError::Closed)?
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

    async fn notifications_by_id(
        &self,
        ids: Vec<Uuid>,
        user_id: Option<Uuid>,
    ) -> Result<Vec<NotificationRecord>, StoreError> {
        let client = self.client().await?;
        let statement = prepared(
            &client,
            "SELECT id, subject, content, code, sender_id, create_time_ms, seq, user_id
             FROM notifications WHERE id = ANY($1) AND ($2::uuid IS NULL OR user_id = $2)",
        )
        .await?;
        let rows = client
            .query(&statement, &[&ids, &user_id])
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|row| record_from(row.get(7), row))
            .collect())
    }

    async fn delete_notifications_by_id(&self, ids: Vec<Uuid>) -> Result<usize, StoreError> {
        let client = self.client().await?;
        let statement = prepared(&client, "DELETE FROM notifications WHERE id = ANY($1)").await?;
        let deleted = client
            .execute(&statement, &[&ids])
            .await
            .map_err(db_error)?;
        Ok(deleted as usize)
    }

    async fn update_notifications(
        &self,
        updates: Vec<NotificationUpdate>,
    ) -> Result<usize, StoreError> {
        let ids: Vec<Uuid> = updates.iter().map(|u| u.id).collect();
        let subjects: Vec<Option<String>> = updates.iter().map(|u| u.subject.clone()).collect();
        let contents: Vec<Option<String>> = updates.iter().map(|u| u.content.clone()).collect();
        let senders: Vec<Option<Uuid>> = updates.iter().map(|u| u.sender_id).collect();
        let client = self.client().await?;
        // One statement: all or none. An id given twice takes its first change.
        let statement = prepared(
            &client,
            "UPDATE notifications n SET subject = coalesce(u.subject, n.subject),
                 content = coalesce(u.content, n.content),
                 sender_id = coalesce(u.sender_id, n.sender_id)
             FROM (SELECT DISTINCT ON (id) * FROM unnest($1::uuid[], $2::text[], $3::text[],
                       $4::uuid[]) WITH ORDINALITY AS x (id, subject, content, sender_id, ord)
                   ORDER BY id, ord) u
             WHERE n.id = u.id",
        )
        .await?;
        let found = client
            .execute(&statement, &[&ids, &subjects, &contents, &senders])
            .await
            .map_err(db_error)?;
        Ok(found as usize)
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
