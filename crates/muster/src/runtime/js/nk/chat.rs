//! Chat from server code: `channelMessageSend` and `channelIdBuild`.

use muster_js::JsError;
use muster_proto::realtime::ChannelId;
use serde_json::Value;

use super::context::{invalid, refused, shaped, Args, ServerHost};
use crate::functions::{RpcCode, RpcError};

pub(super) const NAMES: &[&str] = &["channelMessageSend", "channelIdBuild"];

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
