//! Chat messages on SQLite: each message is a write of the group commit; history is read by
//! position.

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use uuid::Uuid;

use crate::chat::store::{ChannelMessageRecord, ChatStore, HistoryQuery, HistoryRow};
use crate::store::sqlite::{db_error, parse_uuid, SqliteStore};
use crate::store::StoreError;

#[async_trait]
impl ChatStore for SqliteStore {
    async fn insert_channel_message(
        &self,
        message: ChannelMessageRecord,
    ) -> Result<(), StoreError> {
        // One write job per message; the writer commits every job waiting in its queue in one
        // transaction, so concurrent messages share one fsync.
        self.write("insert_channel_message", move |conn| {
            conn.prepare_cached(
                "INSERT INTO channel_messages
                    (id, channel_id, code, sender_id, username, content, create_time_ms, update_time_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    message.id.to_string(),
                    message.channel_id,
                    message.code,
                    message.sender_id.to_string(),
                    message.username,
                    message.content,
                    message.create_time_ms,
                    message.update_time_ms
                ])
            })
            .map_err(db_error)?;
            Ok(())
        })
        .await
    }

    async fn update_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
        content: String,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let channel_id = channel_id.to_owned();
        self.write("update_channel_message", move |conn| {
            conn.prepare_cached(
                "UPDATE channel_messages SET content = ?4, update_time_ms = ?5
                 WHERE id = ?1 AND sender_id = ?2 AND channel_id = ?3
                 RETURNING create_time_ms",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![
                        id.to_string(),
                        sender.to_string(),
                        channel_id,
                        content,
                        now_ms
                    ],
                    |r| r.get(0),
                )
                .optional()
            })
            .map_err(db_error)?
            .ok_or(StoreError::NotFound)
        })
        .await
    }

    async fn delete_channel_message(
        &self,
        id: Uuid,
        sender: Uuid,
        channel_id: &str,
    ) -> Result<i64, StoreError> {
        let channel_id = channel_id.to_owned();
        self.write("delete_channel_message", move |conn| {
            conn.prepare_cached(
                "DELETE FROM channel_messages WHERE id = ?1 AND sender_id = ?2 AND channel_id = ?3
                 RETURNING create_time_ms",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![id.to_string(), sender.to_string(), channel_id],
                    |r| r.get(0),
                )
                .optional()
            })
            .map_err(db_error)?
            .ok_or(StoreError::NotFound)
        })
        .await
    }

    async fn channel_messages(&self, query: HistoryQuery) -> Result<Vec<HistoryRow>, StoreError> {
        self.read("channel_messages", move |conn| {
            let sql = if query.ascending {
                "SELECT seq, id, code, sender_id, username, content, create_time_ms,
                        update_time_ms, channel_id
                 FROM channel_messages WHERE channel_id = ?1 AND seq > ?2 ORDER BY seq ASC LIMIT ?3"
            } else {
                "SELECT seq, id, code, sender_id, username, content, create_time_ms,
                        update_time_ms, channel_id
                 FROM channel_messages WHERE channel_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3"
            };
            let from = query
                .from_seq
                .unwrap_or(if query.ascending { i64::MIN } else { i64::MAX });
            history_rows(
                conn,
                sql,
                params![query.channel_id, from, query.limit as i64],
            )
        })
        .await
    }

    async fn sender_messages(
        &self,
        sender: Uuid,
        before_seq: Option<i64>,
        limit: usize,
    ) -> Result<Vec<HistoryRow>, StoreError> {
        self.read("sender_messages", move |conn| {
            history_rows(
                conn,
                "SELECT seq, id, code, sender_id, username, content, create_time_ms,
                        update_time_ms, channel_id
                 FROM channel_messages WHERE sender_id = ?1 AND seq < ?2
                 ORDER BY seq DESC LIMIT ?3",
                params![
                    sender.to_string(),
                    before_seq.unwrap_or(i64::MAX),
                    limit as i64
                ],
            )
        })
        .await
    }
}

/// The history rows `sql` selects (seq, id, code, sender, username, content, created, updated,
/// channel).
fn history_rows(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<HistoryRow>, StoreError> {
    type Columns = (i64, String, i32, String, String, String, i64, i64, String);
    let mut statement = conn.prepare_cached(sql).map_err(db_error)?;
    let rows: Vec<Columns> = statement
        .query_map(args, |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(db_error)?;
    rows.into_iter()
        .map(
            |(seq, id, code, sender, username, content, created, updated, channel_id)| {
                Ok(HistoryRow {
                    seq,
                    message: ChannelMessageRecord {
                        id: parse_uuid(&id)?,
                        channel_id,
                        code,
                        sender_id: parse_uuid(&sender)?,
                        username,
                        content,
                        create_time_ms: created,
                        update_time_ms: updated,
                    },
                })
            },
        )
        .collect()
}
