//! Chat history on PostgreSQL. Sending, editing and removing a message are [`Write`]s keyed by
//! channel: one channel's writes run on one writer, in order, so its history order (`seq`) is the
//! order they were sent in, and each sender is answered once its message is durable.

use std::time::Instant;

use async_trait::async_trait;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;
use uuid::Uuid;

use crate::chat::store::{ChannelMessageRecord, ChatStore, HistoryQuery, HistoryRow};
use crate::store::postgres::writer::{key_of, Write};
use crate::store::postgres::{db_error, prepared, PostgresStore};
use crate::store::StoreError;

struct InsertMessage(ChannelMessageRecord);

impl Write for InsertMessage {
    type Output = ();
    const PATH: &'static str = "insert_channel_message";
    const SQL: &'static str = "INSERT INTO channel_messages
            (id, channel_id, code, sender_id, username, content, create_time_ms, update_time_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
    const TYPES: &'static [Type] = &[
        Type::UUID,
        Type::TEXT,
        Type::INT4,
        Type::UUID,
        Type::TEXT,
        Type::TEXT,
        Type::INT8,
        Type::INT8,
    ];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let m = &self.0;
        vec![
            &m.id,
            &m.channel_id,
            &m.code,
            &m.sender_id,
            &m.username,
            &m.content,
            &m.create_time_ms,
            &m.update_time_ms,
        ]
    }

    fn outcome(&self, _rows: Vec<Row>) -> Result<(), StoreError> {
        Ok(())
    }
}

/// An edit by the message's sender; answers the message's creation time, or None when the
/// sender has no such message in the channel.
struct UpdateMessage {
    id: Uuid,
    sender: Uuid,
    channel_id: String,
    content: String,
    now_ms: i64,
}

impl Write for UpdateMessage {
    type Output = Option<i64>;
    const PATH: &'static str = "update_channel_message";
    const SQL: &'static str = "UPDATE channel_messages SET content = $4, update_time_ms = $5
         WHERE id = $1 AND sender_id = $2 AND channel_id = $3
         RETURNING create_time_ms";
    const TYPES: &'static [Type] = &[Type::UUID, Type::UUID, Type::TEXT, Type::TEXT, Type::INT8];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.id,
            &self.sender,
            &self.channel_id,
            &self.content,
            &self.now_ms,
        ]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Option<i64>, StoreError> {
        Ok(rows.first().map(|r| r.get(0)))
    }
}

/// A removal by the message's sender; answers as [`UpdateMessage`] does.
struct DeleteMessage {
    id: Uuid,
    sender: Uuid,
    channel_id: String,
}

impl Write for DeleteMessage {
    type Output = Option<i64>;
    const PATH: &'static str = "delete_channel_message";
    const SQL: &'static str = "DELETE FROM channel_messages
         WHERE id = $1 AND sender_id = $2 AND channel_id = $3
         RETURNING create_time_ms";
    const TYPES: &'static [Type] = &[Type::UUID, Type::UUID, Type::TEXT];

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![&self.id, &self.sender, &self.channel_id]
    }

    fn outcome(&self, rows: Vec<Row>) -> Result<Option<i64>, StoreError> {
        Ok(rows.first().map(|r| r.get(0)))
    }
}

fn history_row(row: &Row, channel_id: &str) -> HistoryRow {
    HistoryRow {
        seq: row.get(0),
        message: ChannelMessageRecord {
            id: row.get(1),
            channel_id: channel_id.to_owned(),
            code: row.get(2),
            sender_id: row.get(3),
            username: row.get(4),
            content: row.get(5),
            create_time_ms: row.get(6),
            update_time_ms: row.get(7),
        },
    }
}

#[async_trait]
impl ChatStore for PostgresStore {
    async fn insert_channel_message(
        &self,
        message: ChannelMessageRecord,
    ) -> Result<(), StoreError> {
        let key = key_of(&message.channel_id);
        self.writers.write(key, InsertMessage(message)).await
    }

    async fn update_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
        content: String,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let write = UpdateMessage {
            id,
            sender,
            channel_id: channel_id.to_owned(),
            content,
            now_ms,
        };
        self.writers
            .write(key_of(channel_id), write)
            .await?
            .ok_or(StoreError::NotFound)
    }

    async fn delete_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
    ) -> Result<i64, StoreError> {
        let write = DeleteMessage {
            id,
            sender,
            channel_id: channel_id.to_owned(),
        };
        self.writers
            .write(key_of(channel_id), write)
            .await?
            .ok_or(StoreError::NotFound)
    }

    async fn channel_messages(&self, query: HistoryQuery) -> Result<Vec<HistoryRow>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let sql = if query.ascending {
            "SELECT seq, id, code, sender_id, username, content, create_time_ms, update_time_ms
             FROM channel_messages WHERE channel_id = $1 AND seq > $2 ORDER BY seq ASC LIMIT $3"
        } else {
            "SELECT seq, id, code, sender_id, username, content, create_time_ms, update_time_ms
             FROM channel_messages WHERE channel_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3"
        };
        let from = query
            .from_seq
            .unwrap_or(if query.ascending { i64::MIN } else { i64::MAX });
        let rows = client
            .query(
                &prepared(&client, sql).await?,
                &[&query.channel_id, &from, &(query.limit as i64)],
            )
            .await
            .map_err(db_error)?;
        self.metrics
            .observe_db("channel_messages", started.elapsed());
        Ok(rows
            .iter()
            .map(|r| history_row(r, &query.channel_id))
            .collect())
    }

    async fn sender_messages(
        &self,
        sender: Uuid,
        before_seq: Option<i64>,
        limit: usize,
    ) -> Result<Vec<HistoryRow>, StoreError> {
        let started = Instant::now();
        let client = self.client().await?;
        let sql = "SELECT seq, id, code, sender_id, username, content, create_time_ms,
                          update_time_ms, channel_id
                   FROM channel_messages WHERE sender_id = $1 AND seq < $2
                   ORDER BY seq DESC LIMIT $3";
        let rows = client
            .query(
                &prepared(&client, sql).await?,
                &[&sender, &before_seq.unwrap_or(i64::MAX), &(limit as i64)],
            )
            .await
            .map_err(db_error)?;
        self.metrics
            .observe_db("sender_messages", started.elapsed());
        Ok(rows
            .iter()
            .map(|r| history_row(r, r.get::<_, &str>(8)))
            .collect())
    }
}
