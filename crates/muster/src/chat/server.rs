//! Messages server code sends into a channel (Nakama's `channelMessageSend`): from the system
//! user, or in a user's name, to every member wherever they are, whether or not anyone on this
//! node is in the channel.

use muster_proto::realtime::{ChannelId, ChannelMessageAck};
use uuid::Uuid;

use super::handlers::{new_message, prepare_for};
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
}
