//! An authoritative match in a VM of its own: the handlers a module passed to
//! `initializer.registerMatch(name, {matchInit, matchJoinAttempt, …})`, called with Nakama's
//! arguments, the match's state kept inside the VM between calls. What the handlers ask of
//! the dispatcher (`broadcastMessage`, `matchKick`, `matchLabelUpdate`) is collected as
//! [`Dispatch`]es for the server to carry out when the call returns.

use std::sync::{Arc, Mutex};

use rquickjs::{ArrayBuffer, CatchResultExt, Ctx, FromJs, Function, Object, Value};
use serde::{Deserialize, Serialize};

use crate::utils::bytes_of;
use crate::{engine, thrown, JsError, Vm};

/// A player in a match, as Nakama's `Presence` names its fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Presence {
    pub user_id: String,
    pub session_id: String,
    pub username: String,
    pub node: String,
}

/// One message a player sent since the previous tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchMessage {
    /// The sender's session id: the script gets the sender's presence as it joined.
    pub sender: String,
    pub op_code: i64,
    pub data: Vec<u8>,
    pub reliable: bool,
    pub receive_time_ms: i64,
}

/// What `matchInit` chose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchInit {
    pub tick_rate: Option<u32>,
    pub label: Option<String>,
}

/// A dispatcher call to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// `match_data` to the sessions named (every player when `None`).
    Broadcast {
        op_code: i64,
        data: Vec<u8>,
        to: Option<Vec<String>>,
        reliable: bool,
    },
    /// These sessions leave the match.
    Kick(Vec<String>),
    /// The match's label becomes this.
    Label(String),
}

/// The global property (an integer key, set by the prelude) holding the glue's `loop`.
const LOOP_GLUE_KEY: u32 = 1_000_001;

/// Dispatches collected during a call.
pub(crate) type Dispatches = Arc<Mutex<Vec<Dispatch>>>;

/// Installs `__muster_dispatch(kind, opCode, data, sessions, reliable)`, which queues one
/// dispatch: kind 0 broadcast, 1 kick (`sessions`), 2 label (`data`).
pub(crate) fn install(ctx: &Ctx<'_>, dispatches: Dispatches) -> rquickjs::Result<()> {
    let queue = Function::new(
        ctx.clone(),
        move |args: rquickjs::function::Rest<Value<'_>>| match args.0.first() {
            Some(kind) => {
                let ctx = kind.ctx().clone();
                let kind = kind.as_int().unwrap_or(0);
                queue_dispatch(&ctx, &dispatches, kind, args.0[1..].to_vec())
            }
            None => Ok(()),
        },
    )?;
    ctx.globals().set("__muster_dispatch", queue)
}

/// `__muster_dispatch(kind, opCode, data, sessions, reliable)`.
fn queue_dispatch<'js>(
    ctx: &Ctx<'js>,
    dispatches: &Dispatches,
    kind: i32,
    args: Vec<Value<'js>>,
) -> rquickjs::Result<()> {
    let arg = |i: usize| args.get(i).filter(|v| !v.is_null() && !v.is_undefined());
    let data = match arg(1) {
        Some(value) => bytes_of(ctx, value, "the message data")?,
        None => Vec::new(),
    };
    let sessions = match arg(2) {
        Some(value) => Some(Vec::<String>::from_js(ctx, value.clone())?),
        None => None,
    };
    let dispatch = match kind {
        0 => Dispatch::Broadcast {
            op_code: arg(0).and_then(|v| v.as_number()).unwrap_or(0.0) as i64,
            data,
            to: sessions,
            reliable: arg(3).and_then(|v| v.as_bool()).unwrap_or(true),
        },
        1 => Dispatch::Kick(sessions.unwrap_or_default()),
        _ => Dispatch::Label(String::from_utf8_lossy(&data).into_owned()),
    };
    if let Ok(mut queued) = dispatches.lock() {
        queued.push(dispatch);
    }
    Ok(())
}

impl Vm {
    /// Starts match `name`: `matchInit(ctx, logger, nk, params)`; `context` is kept for every
    /// later call of this match.
    pub fn match_init(
        &self,
        name: &str,
        context: &serde_json::Value,
        params: &serde_json::Value,
    ) -> Result<MatchInit, JsError> {
        let answer = self.match_call(
            "init",
            |ctx| {
                Ok(vec![
                    ctx.json_parse(serde_json::to_string(name).unwrap_or_default())?,
                    ctx.json_parse(context.to_string())?,
                    ctx.json_parse(params.to_string())?,
                ])
            },
            json_text,
        )?;
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
        Ok(MatchInit {
            tick_rate: answer
                .get("tickRate")
                .and_then(|r| r.as_f64())
                .filter(|r| *r >= 1.0)
                .map(|r| r as u32),
            label: answer
                .get("label")
                .and_then(|l| l.as_str())
                .map(str::to_owned),
        })
    }

    /// `matchJoinAttempt`: `Ok(Ok(()))` accepted, `Ok(Err(reason))` refused.
    pub fn match_join_attempt(
        &self,
        tick: u64,
        presence: &Presence,
        metadata: &serde_json::Value,
    ) -> Result<Result<(), String>, JsError> {
        let answer = self.match_call(
            "joinAttempt",
            |ctx| {
                Ok(vec![
                    Value::new_number(ctx.clone(), tick as f64),
                    presence_value(ctx, presence)?,
                    ctx.json_parse(metadata.to_string())?,
                ])
            },
            json_text,
        )?;
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
        if answer.get("accept").and_then(|a| a.as_bool()) == Some(true) {
            Ok(Ok(()))
        } else {
            Ok(Err(answer
                .get("rejectMessage")
                .and_then(|m| m.as_str())
                .unwrap_or("rejected")
                .to_owned()))
        }
    }

    /// `matchJoin` (`leave`: `matchLeave`) with these presences; false when it ended the match.
    pub fn match_presences(
        &self,
        leave: bool,
        tick: u64,
        presences: &[Presence],
    ) -> Result<bool, JsError> {
        let kind = if leave { "leave" } else { "join" };
        self.match_call(
            kind,
            |ctx| {
                let list = rquickjs::Array::new(ctx.clone())?;
                for (i, presence) in presences.iter().enumerate() {
                    list.set(i, presence_value(ctx, presence)?)?;
                }
                Ok(vec![
                    Value::new_number(ctx.clone(), tick as f64),
                    list.into_value(),
                ])
            },
            |answer| Ok(answer.as_bool().unwrap_or(false)),
        )
    }

    /// `matchLoop` with the tick's messages; false when it ended the match.
    pub fn match_loop(&self, tick: u64, messages: &[MatchMessage]) -> Result<bool, JsError> {
        // Each message as [sender's session id, opCode, data, reliable, receiveTimeMs]: set by
        // index, no property name to look up; the glue makes Nakama's message objects.
        self.with_deadline(|| {
            self.context.with(|ctx| {
                // Under an integer key: found without hashing a name.
                let glue: Function = ctx.globals().get(LOOP_GLUE_KEY).map_err(engine)?;
                let list = rquickjs::Array::new(ctx.clone()).map_err(engine)?;
                for (i, message) in messages.iter().enumerate() {
                    let entry = rquickjs::Array::new(ctx.clone()).map_err(engine)?;
                    let fields = || -> rquickjs::Result<()> {
                        entry.set(0, message.sender.as_str())?;
                        entry.set(1, message.op_code as f64)?;
                        entry.set(2, ArrayBuffer::new_copy(ctx.clone(), &message.data)?)?;
                        entry.set(3, message.reliable)?;
                        entry.set(4, message.receive_time_ms as f64)?;
                        list.set(i, entry.clone())
                    };
                    fields().map_err(engine)?;
                }
                let answer: Value = glue
                    .call((tick as f64, list))
                    .catch(&ctx)
                    .map_err(|e| thrown(e, "match loop"))?;
                Ok(answer.as_bool().unwrap_or(false))
            })
        })
    }

    /// `matchTerminate` with `grace_seconds`.
    pub fn match_terminate(&self, tick: u64, grace_seconds: u32) -> Result<(), JsError> {
        self.match_call(
            "terminate",
            |ctx| {
                Ok(vec![
                    Value::new_number(ctx.clone(), tick as f64),
                    Value::new_number(ctx.clone(), f64::from(grace_seconds)),
                ])
            },
            |_| Ok(()),
        )
    }

    /// `matchSignal`: the data it answers.
    pub fn match_signal(&self, tick: u64, data: &str) -> Result<String, JsError> {
        self.match_call(
            "signal",
            |ctx| {
                Ok(vec![
                    Value::new_number(ctx.clone(), tick as f64),
                    rquickjs::String::from_str(ctx.clone(), data)?.into_value(),
                ])
            },
            |answer| {
                Ok(answer
                    .as_string()
                    .and_then(|s| s.to_string().ok())
                    .unwrap_or_default())
            },
        )
    }

    /// The match's state as JSON (`JSON.stringify` of what the handlers last answered), for
    /// an operator; a state JSON cannot hold (a cycle, a BigInt) is an error.
    pub fn match_state(&self) -> Result<String, JsError> {
        self.match_call(
            "state",
            |_| Ok(Vec::new()),
            |answer| {
                Ok(answer
                    .as_string()
                    .and_then(|s| s.to_string().ok())
                    .unwrap_or_default())
            },
        )
    }

    /// The dispatches the last calls asked for, in order.
    pub fn take_dispatches(&self) -> Vec<Dispatch> {
        self.dispatches
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default()
    }

    /// Calls `__muster_match[kind](...args)` (the prelude's glue, which keeps the state): its
    /// answer, read by `read`.
    fn match_call<R>(
        &self,
        kind: &str,
        args: impl for<'js> FnOnce(&Ctx<'js>) -> rquickjs::Result<Vec<Value<'js>>>,
        read: impl for<'js> FnOnce(Value<'js>) -> rquickjs::Result<R>,
    ) -> Result<R, JsError> {
        self.with_deadline(|| {
            self.context.with(|ctx| {
                let glue: Object = ctx.globals().get("__muster_match").map_err(engine)?;
                let function: Function = glue.get(kind).map_err(engine)?;
                let args = args(&ctx).map_err(engine)?;
                let mut call = rquickjs::function::Args::new(ctx.clone(), args.len());
                for arg in args {
                    call.push_arg(arg).map_err(engine)?;
                }
                let answer: Value = function
                    .call_arg(call)
                    .catch(&ctx)
                    .map_err(|e| thrown(e, &format!("match {kind}")))?;
                read(answer).map_err(engine)
            })
        })
    }
}

/// An answer as JSON text (empty when it has none).
fn json_text(answer: Value<'_>) -> rquickjs::Result<String> {
    let ctx = answer.ctx().clone();
    Ok(ctx
        .json_stringify(answer)?
        .map(|s| s.to_string())
        .transpose()?
        .unwrap_or_default())
}

fn presence_value<'js>(ctx: &Ctx<'js>, presence: &Presence) -> rquickjs::Result<Value<'js>> {
    let object = Object::new(ctx.clone())?;
    object.set("userId", presence.user_id.as_str())?;
    object.set("sessionId", presence.session_id.as_str())?;
    object.set("username", presence.username.as_str())?;
    object.set("node", presence.node.as_str())?;
    Ok(object.into_value())
}
