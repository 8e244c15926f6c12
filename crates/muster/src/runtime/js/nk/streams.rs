//! Streams (`crate::streams`): `streamUserList`, `streamUserGet`, `streamUserJoin`,
//! `streamUserUpdate`, `streamUserLeave`, `streamUserKick`, `streamCount`, `streamClose`,
//! `streamSend`, `streamSendRaw`, with Nakama's arguments and answers.

use muster_js::JsError;
use muster_proto::realtime::{Envelope, Stream};
use serde_json::{json, Value};
use uuid::Uuid;

use super::context::{invalid, parse_user, Args, ServerHost};
use crate::streams::{StreamError, StreamKey, StreamMember};

pub(super) const NAMES: &[&str] = &[
    "streamUserList",
    "streamUserGet",
    "streamUserJoin",
    "streamUserUpdate",
    "streamUserLeave",
    "streamUserKick",
    "streamCount",
    "streamClose",
    "streamSend",
    "streamSendRaw",
];

/// Longest `streamSend` data, in bytes (a realtime frame's worth).
const MAX_DATA_BYTES: usize = 64 * 1024;

/// Most presences one send may name.
const MAX_PRESENCES: usize = 1_000;

pub(super) fn call(host: &ServerHost, name: &str, args: &Args) -> Result<Value, JsError> {
    let streams = &host.services.streams;
    let node = host.services.matches.node();
    match name {
        // streamUserList(stream, includeHidden = true, includeNotHidden = true)
        "streamUserList" => {
            let key = stream(args.get(0))?;
            let hidden = args.bool(1).unwrap_or(true);
            let not_hidden = args.bool(2).unwrap_or(true);
            let members = streams.list(&key, hidden, not_hidden);
            Ok(Value::Array(
                members.iter().map(|m| presence(m, node)).collect(),
            ))
        }
        // streamUserGet(userId, sessionId, stream)
        "streamUserGet" => {
            let (_, session) = user_and_session(args)?;
            let key = stream(args.get(2))?;
            Ok(match streams.get(&key, session) {
                Some(member) => json!({
                    "hidden": member.hidden,
                    "persistence": member.presence.persistence,
                    "username": member.presence.username,
                    "status": member.presence.status.clone().unwrap_or_default(),
                    "reason": member.reason,
                }),
                None => Value::Null,
            })
        }
        // streamUserJoin(userId, sessionId, stream, hidden, persistence, status)
        "streamUserJoin" | "streamUserUpdate" => {
            let (user, session) = user_and_session(args)?;
            let key = stream(args.get(2))?;
            let hidden = args.bool(3).unwrap_or(false);
            let persistence = args.bool(4).unwrap_or(false);
            let status = args.opt_string(5).unwrap_or_default();
            if status.len() > 2048 {
                return Err(invalid("status is longer than 2048 bytes"));
            }
            if name == "streamUserJoin" {
                let new = streams
                    .join(&key, user, session, hidden, persistence, &status)
                    .map_err(refused)?;
                Ok(json!(new))
            } else {
                streams
                    .update(&key, user, session, hidden, persistence, &status)
                    .map_err(refused)?;
                Ok(Value::Null)
            }
        }
        // streamUserLeave(userId, sessionId, stream)
        "streamUserLeave" => {
            let (_, session) = user_and_session(args)?;
            let key = stream(args.get(2))?;
            streams.leave(&key, session);
            Ok(Value::Null)
        }
        // streamUserKick(presence, stream)
        "streamUserKick" => {
            let presence = args.get(0);
            if !presence.is_object() {
                return Err(invalid("expects a presence object"));
            }
            let session = session_of(presence)?;
            let key = stream(args.get(1))?;
            streams.leave(&key, session);
            Ok(Value::Null)
        }
        "streamCount" => Ok(json!(streams.count(&stream(args.get(0))?))),
        "streamClose" => {
            streams.close(&stream(args.get(0))?);
            Ok(Value::Null)
        }
        // streamSend(stream, data, presences?, reliable = true)
        "streamSend" => {
            let key = stream(args.get(0))?;
            let data = args.string(1, "data")?;
            if data.len() > MAX_DATA_BYTES {
                return Err(invalid(format!(
                    "data is longer than {MAX_DATA_BYTES} bytes"
                )));
            }
            let to = presences(args.get(2))?;
            let reliable = args.bool(3).unwrap_or(true);
            streams.send(&key, data, &to, reliable);
            Ok(Value::Null)
        }
        // streamSendRaw(stream, envelope, presences?, reliable = true)
        "streamSendRaw" => {
            let key = stream(args.get(0))?;
            let text = args.get(1).to_string();
            if text.len() > MAX_DATA_BYTES {
                return Err(invalid(format!(
                    "the envelope is longer than {MAX_DATA_BYTES} bytes"
                )));
            }
            let envelope: Envelope = muster_proto::realtime::decode_json(text.as_bytes())
                .map_err(|e| invalid(format!("expects a valid realtime envelope: {e}")))?;
            let to = presences(args.get(2))?;
            streams.send_raw(&key, envelope, &to);
            Ok(Value::Null)
        }
        _ => Err(JsError::new(format!("nk.{name} is not available"), 12)),
    }
}

fn refused(error: StreamError) -> JsError {
    match error {
        StreamError::TooMany => JsError::new(error.to_string(), 8),
        StreamError::NoSession => JsError::new(error.to_string(), 5),
        StreamError::Invalid(message) => invalid(message),
    }
}

/// A stream object (`{mode, subject, subcontext, label}`), checked.
fn stream(value: &Value) -> Result<StreamKey, JsError> {
    let Value::Object(object) = value else {
        return Err(invalid("expects a stream object"));
    };
    let text = |key: &str| -> Result<String, JsError> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(invalid(format!("stream {key} must be a string"))),
        }
    };
    let mode = match object.get("mode") {
        None | Some(Value::Null) => 0,
        Some(value) => value
            .as_f64()
            .filter(|n| n.fract() == 0.0 && (0.0..=255.0).contains(n))
            .ok_or_else(|| invalid("stream mode must be a number"))? as i32,
    };
    let wire = Stream {
        mode,
        subject: text("subject")?,
        subcontext: text("subcontext")?,
        label: text("label")?,
    };
    StreamKey::of(&wire).map_err(refused)
}

fn user_and_session(args: &Args) -> Result<(Uuid, Uuid), JsError> {
    let user = args.user(0, "userId")?;
    let session = args.string(1, "sessionId")?;
    let session = Uuid::parse_str(&session).map_err(|_| invalid("invalid session id"))?;
    Ok((user, session))
}

fn session_of(presence: &Value) -> Result<Uuid, JsError> {
    let text = presence["sessionId"]
        .as_str()
        .ok_or_else(|| invalid("presence sessionId must be a string"))?;
    Uuid::parse_str(text).map_err(|_| invalid("invalid presence sessionId"))
}

/// The sessions a list of presences names (none: the whole stream).
fn presences(value: &Value) -> Result<Vec<Uuid>, JsError> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(list) => {
            if list.len() > MAX_PRESENCES {
                return Err(invalid(format!("at most {MAX_PRESENCES} presences")));
            }
            list.iter()
                .map(|p| {
                    if let Some(user) = p.get("userId") {
                        parse_user(user, "presence userId")?;
                    }
                    session_of(p)
                })
                .collect()
        }
        _ => Err(invalid("expects an array of presence objects")),
    }
}

/// A member as Nakama's runtime lists it.
fn presence(member: &StreamMember, node: &str) -> Value {
    let p = &member.presence;
    json!({
        "userId": p.user_id,
        "sessionId": p.session_id,
        "nodeId": node,
        "hidden": member.hidden,
        "persistence": p.persistence,
        "username": p.username,
        "status": p.status.clone().unwrap_or_default(),
        "reason": member.reason,
    })
}
