//! Messages server code sends into a channel (Nakama's `channelMessageSend`), edits and
//! removes (`channelMessageUpdate`, `channelMessageRemove`): from the system user, or in a
//! user's name, to every member wherever they are, whether or not anyone on this node is in the
//! channel.

use muster_proto::realtime::{ChannelId, ChannelMessageAck};
use uuid::Uuid;

use super::handlers::{code, new_message, prepare_for};
use super::store::ChannelMessageRecord;
use super::{rules, Chat, ChatError};

impl Chat {
    /// Sends `content` (a JSON object) into `channel_id` as `sender` (user id and username;
    /// the system user, nil id and no name, when `None`), stored first when `persistent`.
    pub async fn send_as_server(
        &self,
        channel_id: &str,
        content: String,
        sender: Option<(Uuid, String)>,
        persistent: bool,
    ) -> Result<ChannelMessageAck, ChatError> {
        ChannelId::parse(channel_id)
            .map_err(|error| ChatError::InvalidChannelId(error.to_string()))?;
        rules::check_content(&content, self.config.max_content_bytes)?;
        let sender = sender.unwrap_or((Uuid::nil(), String::new()));
        let record = new_message(self, channel_id, sender, content, persistent).await?;
        let (ack, message) = prepare_for(channel_id, record, persistent);
        self.router.send_to_channel_id(channel_id, &message);
        self.metrics
            .chat_messages_in
            .with_label_values(&["send"])
            .inc();
        Ok(ack)
    }

    /// Changes message `message_id` of `channel_id` to `content` (a JSON object), or removes it
    /// (`content` `None`): a message `sender` sent there (the system user when `None`). The
    /// members are sent the change (code 1) or the removal (code 2).
    pub async fn change_as_server(
        &self,
        channel_id: &str,
        message_id: &str,
        content: Option<String>,
        sender: Option<(Uuid, String)>,
    ) -> Result<ChannelMessageAck, ChatError> {
        ChannelId::parse(channel_id)
            .map_err(|error| ChatError::InvalidChannelId(error.to_string()))?;
        if let Some(content) = &content {
            rules::check_content(content, self.config.max_content_bytes)?;
        }
        let (sender, username) = sender.unwrap_or((Uuid::nil(), String::new()));
        let id = Uuid::parse_str(message_id).map_err(|_| ChatError::InvalidMessageId)?;
        let issued = self
            .ids
            .verify(&id, &sender, channel_id)
            .ok_or(ChatError::MessageNotFound)?;
        let now = crate::base::clock::now_ms();
        let removing = content.is_none();
        let create_time_ms = match (&content, issued.persisted) {
            (_, false) => issued.create_time_ms,
            (Some(content), true) => {
                self.messages
                    .update_channel_message(id, sender, channel_id, content.clone(), now)
                    .await?
            }
            (None, true) => {
                self.messages
                    .delete_channel_message(id, sender, channel_id)
                    .await?
            }
        };
        let record = ChannelMessageRecord {
            id,
            channel_id: channel_id.to_owned(),
            code: if removing { code::REMOVE } else { code::UPDATE },
            sender_id: sender,
            username,
            content: content.unwrap_or_else(|| "{}".to_owned()),
            create_time_ms,
            update_time_ms: now,
        };
        let (ack, message) = prepare_for(channel_id, record, issued.persisted);
        self.router.send_to_channel_id(channel_id, &message);
        self.metrics
            .chat_messages_in
            .with_label_values(&[if removing { "remove" } else { "update" }])
            .inc();
        Ok(ack)
    }
}
