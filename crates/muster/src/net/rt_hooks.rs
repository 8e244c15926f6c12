//! A module's realtime hooks (`registerRtBefore`, `registerRtAfter`) around one envelope, as
//! Nakama runs them: [`handle`] is what every transport calls, a wrapper around
//! `dispatch::dispatch` as the HTTP hooks are a layer around the routes.
//!
//! The before hook gets the envelope (`{channelJoin: {...}}`) and answers the envelope to go on
//! with; nothing refuses it ("Requested resource was not found."), a throw
//! refuses it with the thrown message. The after hook gets the reply and the request, once the
//! reply is sent, and changes nothing.

use std::sync::Arc;

use muster_js::Hook;
use muster_proto::realtime::{error_code, Envelope};
use serde_json::{json, Value};

use super::dispatch::{dispatch, Handling};
use crate::net::state::AppState;
use crate::runtime::js::Module;
use crate::session::Session;

/// Answers one envelope from `session`: through the module's realtime hooks when it has some
/// for this kind of message.
pub fn handle<'a>(
    envelope: Envelope,
    session: &'a Arc<Session>,
    state: &'a AppState,
) -> Handling<'a> {
    let Some(message) = &envelope.message else {
        return Handling::Now(None);
    };
    state
        .services
        .metrics
        .realtime_messages
        .with_label_values(&[message.kind()])
        .inc();
    if let Some(module) = state.module.as_ref().filter(|m| m.has_rt_hooks()) {
        let name = hook_name(message.kind());
        if module.has_hook(muster_js::Hook::RtBefore, &name)
            || module.has_hook(muster_js::Hook::RtAfter, &name)
        {
            return Handling::Later(Box::pin(hooked(envelope, name, session, state, module)));
        }
    }
    dispatch(envelope, session, state)
}

/// Nakama's name of a message kind: `channel_join` → `ChannelJoin`.
pub fn hook_name(kind: &str) -> String {
    kind.split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

pub async fn hooked(
    envelope: Envelope,
    name: String,
    session: &Arc<Session>,
    state: &AppState,
    module: &Arc<Module>,
) -> Option<Envelope> {
    let cid = envelope.cid.clone();
    let context = json!({
        "executionMode": "before",
        "userId": session.user_id.to_string(),
        "username": &*session.username,
        "sessionId": session.session_id.to_string(),
    });
    let request = message_json(&envelope);
    let envelope = if module.has_hook(Hook::RtBefore, &name) {
        match module
            .call_hook(Hook::RtBefore, &name, context.clone(), &request, None)
            .await
        {
            Ok(Some(changed)) => match rebuild(&cid, changed) {
                Some(envelope) => envelope,
                None => {
                    return Some(Envelope::error(
                        cid,
                        error_code::RUNTIME_FUNCTION_EXCEPTION,
                        format!(
                        "The {name} before hook answered something that is not a {name} message."
                    ),
                    ))
                }
            },
            Ok(None) => {
                return Some(Envelope::error(
                    cid,
                    error_code::UNRECOGNIZED_PAYLOAD,
                    "Requested resource was not found.",
                ))
            }
            Err(error) => {
                return Some(Envelope::error(
                    cid,
                    error_code::RUNTIME_FUNCTION_EXCEPTION,
                    error.message,
                ))
            }
        }
    } else {
        envelope
    };
    let reply = match dispatch(envelope, session, state) {
        Handling::Now(reply) => reply,
        Handling::Later(answer) => answer.await,
    };
    if module.has_hook(Hook::RtAfter, &name) {
        let output = reply.as_ref().map_or(Value::Null, message_json);
        let module = module.clone();
        let mut context = context;
        context["executionMode"] = json!("after");
        tokio::spawn(async move {
            if let Err(error) = module
                .call_hook(Hook::RtAfter, &name, context, &output, Some(&request))
                .await
            {
                tracing::debug!(hook = %name, message = %error.message, "a realtime after hook failed");
            }
        });
    }
    reply
}

/// The envelope as JSON without its `cid`: `{"channel_join": {...}}`.
fn message_json(envelope: &Envelope) -> Value {
    let mut value: Value =
        serde_json::from_str(&muster_proto::realtime::encode_json(envelope)).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.remove("cid");
    }
    value
}

/// A hook's answer as an envelope again, with the request's `cid`.
fn rebuild(cid: &str, mut changed: Value) -> Option<Envelope> {
    let object = changed.as_object_mut()?;
    object.insert("cid".into(), json!(cid));
    muster_proto::realtime::decode_json(changed.to_string().as_bytes()).ok()
}
