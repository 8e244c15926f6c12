//! Chat from server code: `channelMessageSend`, `channelMessageUpdate`, `channelMessageRemove`,
//! `channelMessagesList` and `channelIdBuild`.

use muster_js::JsError;
use muster_proto::realtime::ChannelId;
use serde_json::Value;

use super::context::{invalid, refused, shaped, Args, ServerHost};
use crate::functions::{RpcCode, RpcError};

pub(super) const NAMES: &[&str] = &[
    "channelMessageSend",
    "channelMessageUpdate",
    "channelMessageRemove",
    "channelMessagesList",
    "channelIdBuild",
];

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    match name {
        // channelMessageSend(channelId, content?, senderId?, senderUsername?, persist?)
        "channelMessageSend" => {
            let channel = args.string(0, "channelId")?;
            let content = args.json_text(1, "content")?;
            let sender = args
                .opt_user(2, "senderId")?
                .map(|id| (id, args.opt_string(3).unwrap_or_default()));
            let persist = args.bool(4).unwrap_or(true);
            let ack = host
                .wait(
                    host.services
                        .chat
                        .send_as_server(&channel, content, sender, persist),
                )?
                .map_err(|e| refused(RpcError::new(RpcCode::InvalidArgument, e.to_string())))?;
            Ok(shaped(ack))
        }
        // channelMessageUpdate(channelId, messageId, content?, senderId?, senderUsername?,
        // persist?), channelMessageRemove(channelId, messageId, senderId?, senderUsername?,
        // persist?): a message sent in that sender's name (the system's when none). Whether it
        // is stored is the message's own (as sent); `persist` is read and not needed.
        "channelMessageUpdate" | "channelMessageRemove" => {
            let channel = args.string(0, "channelId")?;
            let message = args.string(1, "messageId")?;
            let (content, at) = if name == "channelMessageUpdate" {
                let content = if args.missing(2) {
                    "{}".to_owned()
                } else {
                    args.json_text(2, "content")?
                };
                (Some(content), 3)
            } else {
                (None, 2)
            };
            let sender = args
                .opt_user(at, "senderId")?
                .map(|id| (id, args.opt_string(at + 1).unwrap_or_default()));
            let ack = host
                .wait(
                    host.services
                        .chat
                        .change_as_server(&channel, &message, content, sender),
                )?
                .map_err(|e| refused(RpcError::new(RpcCode::InvalidArgument, e.to_string())))?;
            Ok(shaped(ack))
        }
        // channelMessagesList(channelId, limit = 100, forward = true, cursor?)
        "channelMessagesList" => {
            let request = crate::chat::history::HistoryRequest {
                reader: None,
                channel_id: args.string(0, "channelId")?,
                limit: Some(args.int(1, "limit")?.unwrap_or(100)),
                forward: args.bool(2).unwrap_or(true),
                cursor: args.opt_string(3).unwrap_or_default(),
            };
            let page = host
                .wait(host.services.chat.history(request))?
                .map_err(|e| refused(RpcError::new(RpcCode::InvalidArgument, e.to_string())))?;
            // As Nakama's runtime lists them: each message's content as its JSON text.
            let messages: Vec<Value> = page
                .messages
                .iter()
                .map(|m| {
                    let mut shown = shaped(m);
                    shown["content"] = Value::String(m.content.clone());
                    shown
                })
                .collect();
            Ok(serde_json::json!({
                "messages": messages,
                "nextCursor": page.next_cursor,
                "prevCursor": page.prev_cursor,
            }))
        }
        // channelIdBuild(sender, target, chanType): 1 room, 2 direct, 3 group.
        "channelIdBuild" => {
            let target = args.string(1, "target")?;
            let id = match args.int(2, "chanType")? {
                Some(1) => ChannelId::Room(target),
                Some(2) => {
                    let sender = args.user(0, "sender")?.to_string();
                    ChannelId::direct(&sender, &target)
                }
                Some(3) => ChannelId::Group(target),
                _ => {
                    return Err(invalid(
                        "chanType must be 1 (room), 2 (direct) or 3 (group)",
                    ))
                }
            };
            let text = id.to_string();
            ChannelId::parse(&text).map_err(|e| invalid(e.to_string()))?;
            Ok(Value::String(text))
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}
