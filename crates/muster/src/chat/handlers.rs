//! The five chat requests, answered in the sending socket's task. Each returns the message that
//! answers the sender (or a [`ChatError`], turned into an error envelope in one place).

use std::sync::Arc;

use muster_proto::realtime::{
    Channel as JoinedChannel, ChannelJoin, ChannelLeave, ChannelMessage, ChannelMessageAck,
    ChannelMessageRemove, ChannelMessageSend, ChannelMessageUpdate, Envelope, Message,
};
use muster_proto::wire::Timestamp;
use uuid::Uuid;

use super::ids::Fields;
use super::rules::{self, Target};
use super::{Chat, ChatError};
use crate::chat::store::ChannelMessageRecord;
use crate::cluster::JoinLimits;
use crate::session::channels::{Admitted, Channel, ChannelRefusal, JoinFlags};
use crate::session::fanout::Encoded;
use crate::session::{Answer, Session};

/// Nakama's message codes.
pub mod code {
    pub const CHAT: i32 = 0;
    pub const UPDATE: i32 = 1;
    pub const REMOVE: i32 = 2;
}

/// Answers one chat request from `session`. A refusal is counted here
/// (`muster_chat_errors_total{reason}`) and becomes an error envelope in the dispatcher.
pub async fn handle(
    message: Message,
    session: &Arc<Session>,
    chat: &Chat,
) -> Result<Answer, ChatError> {
    let result = match message {
        Message::ChannelJoin(join_request) => {
            join(join_request, session, chat).await.map(Answer::Reply)
        }
        Message::ChannelLeave(leave_request) => {
            leave(&leave_request, session, chat).map(|()| Answer::Done)
        }
        // An ack follows the `channel_message` the fanout has just queued on the sender's own
        // outbox: the sender sees its own message before the ack, as on Nakama.
        Message::ChannelMessageSend(send_request) => send(send_request, session, chat)
            .await
            .map(Answer::AfterQueued),
        Message::ChannelMessageUpdate(update_request) => update(update_request, session, chat)
            .await
            .map(Answer::AfterQueued),
        Message::ChannelMessageRemove(remove_request) => remove(remove_request, session, chat)
            .await
            .map(Answer::AfterQueued),
        other => {
            tracing::error!(kind = other.kind(), "not a chat request");
            return Ok(Answer::Silent);
        }
    };
    if let Err(error) = &result {
        chat.metrics
            .chat_errors
            .with_label_values(&[error.reason()])
            .inc();
    }
    result
}

async fn join(
    request: ChannelJoin,
    session: &Arc<Session>,
    chat: &Chat,
) -> Result<Message, ChatError> {
    let config = &chat.config;
    let target = rules::target(
        &request.target,
        request.r#type,
        &session.user_id,
        config.max_room_name_chars,
    )?;
    let id = match target {
        Target::Room(id) => id,
        Target::Direct(id, other) => {
            // Only checked on a join that is not already in place: a rejoin skips the store.
            let id_text = id.to_string();
            if session.channels.find(&id_text).is_none() {
                let peers = &chat.peers;
                if peers
                    .accounts
                    .existing(vec![other], Vec::new())
                    .await?
                    .is_empty()
                {
                    return Err(ChatError::UserNotFound);
                }
                if peers.friends.blocked(other, session.user_id).await? {
                    return Err(ChatError::Blocked);
                }
            }
            id
        }
        Target::Group(id, group) => {
            if session.channels.find(&id.to_string()).is_none()
                && !chat.peers.groups.is_member(group, session.user_id).await?
            {
                return Err(ChatError::NotGroupMember);
            }
            id
        }
    };
    let flags = JoinFlags {
        // Nakama's defaults: persisted unless asked not to, visible unless asked to hide.
        persistence: request.persistence.unwrap_or(true),
        hidden: request.hidden.unwrap_or(false),
        ..JoinFlags::default()
    };
    let limits = JoinLimits {
        // Chat's bound counts chat channels only, not the socket's status memberships.
        max_channels: config.max_channels_per_socket + session.channels.status_count(),
        max_listed: config.max_listed_presences,
    };
    let joined = chat
        .router
        .join_channel(session, &id.to_string(), flags, limits)
        .map_err(|refusal| refused(refusal, ""))?;
    let fields = Fields::of(&joined.channel.id);
    let mut me = session.presence();
    me.persistence = joined.flags.persistence;
    Ok(Message::Channel(JoinedChannel {
        id: joined.channel.id.to_string(),
        presences: joined.presences,
        self_presence: Some(me),
        room_name: fields.room_name.to_owned(),
        group_id: fields.group_id.to_owned(),
        user_id_one: fields.user_id_one.to_owned(),
        user_id_two: fields.user_id_two.to_owned(),
    }))
}

fn leave(request: &ChannelLeave, session: &Arc<Session>, chat: &Chat) -> Result<(), ChatError> {
    // A status membership is left through status_unfollow or status_update, not here.
    if session
        .channels
        .find(&request.channel_id)
        .is_some_and(|joined| joined.flags.is_status())
    {
        return Err(refused(ChannelRefusal::NotJoined, &request.channel_id));
    }
    chat.router
        .leave_channel(session, &request.channel_id)
        .map_err(|refusal| refused(refusal, &request.channel_id))
}

/// A channel refusal as chat tells it: for a channel not joined, `NotJoined` when the id is
/// well-formed and `InvalidChannelId` otherwise.
fn refused(refusal: ChannelRefusal, channel_id: &str) -> ChatError {
    match refusal {
        ChannelRefusal::TooMany { max } => ChatError::TooManyChannels { max },
        ChannelRefusal::RateLimited { per_sec } => ChatError::RateLimited { per_sec },
        ChannelRefusal::NotJoined => not_joined_or_invalid(channel_id),
    }
}

/// `NotJoined` for a well-formed id, `InvalidChannelId` for anything else.
fn not_joined_or_invalid(channel_id: &str) -> ChatError {
    match muster_proto::realtime::ChannelId::parse(channel_id) {
        Ok(_) => ChatError::not_joined(channel_id),
        Err(error) => ChatError::InvalidChannelId(
            error
                .to_string()
                .trim_start_matches("invalid channel id: ")
                .to_owned(),
        ),
    }
}

/// Finds the joined channel and takes one message from the socket's budget.
fn admit(channel_id: &str, session: &Session, chat: &Chat) -> Result<Admitted, ChatError> {
    let config = &chat.config;
    session
        .channels
        .admit(channel_id, config.messages_per_sec, config.message_burst)
        // A status membership is not a chat channel: nothing may be sent into it.
        .and_then(|admitted| match admitted.flags.is_status() {
            true => Err(ChannelRefusal::NotJoined),
            false => Ok(admitted),
        })
        .map_err(|refusal| refused(refusal, channel_id))
}

async fn send(
    request: ChannelMessageSend,
    session: &Arc<Session>,
    chat: &Chat,
) -> Result<Message, ChatError> {
    let admitted = admit(&request.channel_id, session, chat)?;
    rules::check_content(&request.content, chat.config.max_content_bytes)?;
    let persistent = admitted.flags.persistence;
    let channel = &admitted.channel;
    let sender = (session.user_id, session.username.to_string());
    let record = new_message(chat, &channel.id, sender, request.content, persistent).await?;
    let (ack, message) = prepare(channel, record, persistent);
    chat.router.send_to_channel(channel, &message);
    chat.metrics
        .chat_messages_in
        .with_label_values(&["send"])
        .inc();
    Ok(Message::ChannelMessageAck(ack))
}

/// A new chat message from `sender` into `channel_id`, with its id issued; stored first when
/// `persistent` (the ack and the fanout wait until it is durable).
pub(super) async fn new_message(
    chat: &Chat,
    channel_id: &str,
    (sender_id, username): (Uuid, String),
    content: String,
    persistent: bool,
) -> Result<ChannelMessageRecord, ChatError> {
    let now = crate::base::clock::now_ms();
    let record = ChannelMessageRecord {
        id: chat.ids.issue(now, persistent, &sender_id, channel_id),
        channel_id: channel_id.to_owned(),
        code: code::CHAT,
        sender_id,
        username,
        content,
        create_time_ms: now,
        update_time_ms: now,
    };
    if persistent {
        persist(chat, record).await
    } else {
        Ok(record)
    }
}

async fn persist(
    chat: &Chat,
    record: ChannelMessageRecord,
) -> Result<ChannelMessageRecord, ChatError> {
    // The store takes the record by value; one clone of a short message is cheaper than making
    // every store engine hand it back.
    chat.messages.insert_channel_message(record.clone()).await?;
    Ok(record)
}

async fn update(
    request: ChannelMessageUpdate,
    session: &Arc<Session>,
    chat: &Chat,
) -> Result<Message, ChatError> {
    let admitted = admit(&request.channel_id, session, chat)?;
    rules::check_content(&request.content, chat.config.max_content_bytes)?;
    let (id, issued) = own_message(&request.message_id, session, &admitted.channel, chat)?;
    let now = crate::base::clock::now_ms();
    let create_time_ms = if issued.persisted {
        chat.messages
            .update_channel_message(
                id,
                session.user_id,
                &admitted.channel.id,
                request.content.clone(),
                now,
            )
            .await?
    } else {
        issued.create_time_ms
    };
    let record = ChannelMessageRecord {
        id,
        channel_id: admitted.channel.id.to_string(),
        code: code::UPDATE,
        sender_id: session.user_id,
        username: session.username.to_string(),
        content: request.content,
        create_time_ms,
        update_time_ms: now,
    };
    let (ack, message) = prepare(&admitted.channel, record, issued.persisted);
    chat.router.send_to_channel(&admitted.channel, &message);
    chat.metrics
        .chat_messages_in
        .with_label_values(&["update"])
        .inc();
    Ok(Message::ChannelMessageAck(ack))
}

async fn remove(
    request: ChannelMessageRemove,
    session: &Arc<Session>,
    chat: &Chat,
) -> Result<Message, ChatError> {
    let admitted = admit(&request.channel_id, session, chat)?;
    let (id, issued) = own_message(&request.message_id, session, &admitted.channel, chat)?;
    let now = crate::base::clock::now_ms();
    let create_time_ms = if issued.persisted {
        chat.messages
            .delete_channel_message(id, session.user_id, &admitted.channel.id)
            .await?
    } else {
        issued.create_time_ms
    };
    let record = ChannelMessageRecord {
        id,
        channel_id: admitted.channel.id.to_string(),
        code: code::REMOVE,
        sender_id: session.user_id,
        username: session.username.to_string(),
        content: "{}".to_owned(),
        create_time_ms,
        update_time_ms: now,
    };
    let (ack, message) = prepare(&admitted.channel, record, issued.persisted);
    chat.router.send_to_channel(&admitted.channel, &message);
    chat.metrics
        .chat_messages_in
        .with_label_values(&["remove"])
        .inc();
    Ok(Message::ChannelMessageAck(ack))
}

/// Reads a message id the sender wants to change: it must be an id issued to this sender in
/// this channel.
fn own_message(
    message_id: &str,
    session: &Session,
    channel: &Channel,
    chat: &Chat,
) -> Result<(Uuid, super::ids::Issued), ChatError> {
    let id = Uuid::parse_str(message_id).map_err(|_| ChatError::InvalidMessageId)?;
    let issued = chat
        .ids
        .verify(&id, &session.user_id, &channel.id)
        .ok_or(ChatError::MessageNotFound)?;
    Ok((id, issued))
}

/// The sender's ack and the `channel_message` every member gets (encoded once per format).
fn prepare(
    channel: &Channel,
    record: ChannelMessageRecord,
    persistent: bool,
) -> (ChannelMessageAck, Encoded) {
    prepare_for(&channel.id, record, persistent)
}

/// [`prepare`] for the channel called `channel_id`.
pub(super) fn prepare_for(
    channel_id: &str,
    record: ChannelMessageRecord,
    persistent: bool,
) -> (ChannelMessageAck, Encoded) {
    let fields = Fields::of(channel_id);
    let create_time = Some(Timestamp::from_unix_ms(record.create_time_ms));
    let update_time = Some(Timestamp::from_unix_ms(record.update_time_ms));
    let ack = ChannelMessageAck {
        channel_id: record.channel_id.clone(),
        message_id: record.id.to_string(),
        code: Some(record.code),
        username: record.username.clone(),
        create_time,
        update_time,
        persistent: Some(persistent),
        room_name: fields.room_name.to_owned(),
        group_id: fields.group_id.to_owned(),
        user_id_one: fields.user_id_one.to_owned(),
        user_id_two: fields.user_id_two.to_owned(),
    };
    let message = ChannelMessage {
        channel_id: record.channel_id,
        message_id: ack.message_id.clone(),
        code: Some(record.code),
        sender_id: record.sender_id.to_string(),
        username: record.username,
        content: record.content,
        create_time,
        update_time,
        persistent: Some(persistent),
        room_name: ack.room_name.clone(),
        group_id: ack.group_id.clone(),
        user_id_one: ack.user_id_one.clone(),
        user_id_two: ack.user_id_two.clone(),
    };
    let encoded = Encoded::new(Envelope::new("", Message::ChannelMessage(message)));
    (ack, encoded)
}
