//! A channel's stored history (messages sent by sockets that joined with persistence), a page at
//! a time, as Nakama's `ListChannelMessages`: rooms are readable by any signed-in user, a direct
//! chat only by its two users, a group's only by its members.

use muster_proto::api::ChannelMessageList;
use muster_proto::realtime::{ChannelId, ChannelMessage};
use muster_proto::wire::Timestamp;
use uuid::Uuid;

use super::cursor::{Cursor, Plan, MAX_LIMIT};
use super::ids::Fields;
use super::Chat;
use crate::chat::store::HistoryQuery;
use crate::store::StoreError;

/// One page request.
pub struct HistoryRequest {
    /// Who reads (a direct chat is readable only by its two users, a group's only by its
    /// members); `None`: the server (an operator's console), which reads any channel.
    pub reader: Option<Uuid>,
    pub channel_id: String,
    /// 1–100; 1 when absent, as in Nakama.
    pub limit: Option<i64>,
    /// Oldest first when true.
    pub forward: bool,
    /// A cursor from an earlier page of the same listing; empty for the first page.
    pub cursor: String,
}

/// Why a history page was refused. Messages are shown to the client.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Chat {
    /// One page of `request.channel_id`'s history.
    pub async fn history(
        &self,
        request: HistoryRequest,
    ) -> Result<ChannelMessageList, HistoryError> {
        let channel_id = request.channel_id;
        let channel = ChannelId::parse(&channel_id)
            .map_err(|e| HistoryError::Invalid(format!("Invalid channel ID: {e}.")))?;
        let reader = request.reader;
        match &channel {
            _ if reader.is_none() => {}
            ChannelId::Room(_) => {}
            ChannelId::Group(group) => {
                let member = match Uuid::parse_str(group) {
                    Ok(group) => {
                        let reader = reader.unwrap_or_default();
                        self.peers.groups.is_member(group, reader).await?
                    }
                    Err(_) => false,
                };
                if !member {
                    return Err(HistoryError::Forbidden(
                        "Only a group's members can read its chat history.".into(),
                    ));
                }
            }
            ChannelId::Direct(one, two) => {
                let me = reader.unwrap_or_default().to_string();
                if me != *one && me != *two {
                    return Err(HistoryError::Forbidden(
                        "Only the two users of a direct chat can read its history.".into(),
                    ));
                }
            }
        }
        let limit = match request.limit {
            None => 1,
            Some(n) if (1..=MAX_LIMIT as i64).contains(&n) => n as usize,
            Some(_) => {
                return Err(HistoryError::Invalid(format!(
                    "Invalid limit: it must be between 1 and {MAX_LIMIT}."
                )))
            }
        };
        let forward = request.forward;
        let incoming = request.cursor;
        let cursor = if incoming.is_empty() {
            None
        } else {
            Some(
                Cursor::decode(&incoming, &channel_id, forward)
                    .map_err(|e| HistoryError::Invalid(e.to_string()))?,
            )
        };
        let plan = Plan::new(forward, limit, cursor);
        let rows = self
            .messages
            .channel_messages(HistoryQuery {
                channel_id: channel_id.clone(),
                ascending: plan.ascending,
                from_seq: plan.from_seq,
                limit: plan.read,
            })
            .await?;
        let page = plan.page(rows, &channel_id, &incoming);
        let messages = page.rows.into_iter().map(stored_message).collect();
        Ok(ChannelMessageList {
            messages,
            next_cursor: page.next_cursor.unwrap_or_default(),
            prev_cursor: page.prev_cursor.unwrap_or_default(),
            cacheable_cursor: page.cacheable_cursor.unwrap_or_default(),
        })
    }

    /// Up to `limit` messages `sender` sent in any channel, newest first, before the position
    /// `before` (an earlier page's `next`): an operator's view of a player (the console reads
    /// as the server). The position of the page's last message, when there may be more.
    pub async fn sent_by(
        &self,
        sender: Uuid,
        before: Option<i64>,
        limit: usize,
    ) -> Result<(Vec<ChannelMessage>, Option<i64>), HistoryError> {
        let limit = limit.clamp(1, MAX_LIMIT);
        let mut rows = self
            .messages
            .sender_messages(sender, before, limit + 1)
            .await?;
        let next = if rows.len() > limit {
            rows.truncate(limit);
            rows.last().map(|row| row.seq)
        } else {
            None
        };
        Ok((rows.into_iter().map(stored_message).collect(), next))
    }
}

/// A stored message as Nakama's API shows it.
fn stored_message(row: crate::chat::store::HistoryRow) -> ChannelMessage {
    let m = row.message;
    let fields = Fields::of(&m.channel_id);
    ChannelMessage {
        message_id: m.id.to_string(),
        code: Some(m.code),
        sender_id: m.sender_id.to_string(),
        username: m.username,
        content: m.content,
        create_time: Some(Timestamp::from_unix_ms(m.create_time_ms)),
        update_time: Some(Timestamp::from_unix_ms(m.update_time_ms)),
        persistent: Some(true),
        room_name: fields.room_name.to_owned(),
        group_id: fields.group_id.to_owned(),
        user_id_one: fields.user_id_one.to_owned(),
        user_id_two: fields.user_id_two.to_owned(),
        channel_id: m.channel_id,
    }
}
