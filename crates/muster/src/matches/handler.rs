//! The authoritative match handler: the game logic Muster runs for a match, in Rust.
//!
//! A handler is plain synchronous code owned by its match's task (`super::authoritative`): it
//! never needs a lock, because nothing else touches it. The task calls it in this order:
//!
//! 1. [`MatchHandler::init`] once, with the match's parameters; it may choose the tick rate;
//! 2. [`MatchHandler::join_attempt`] when a player asks to join (after the capacity check); an
//!    `Err` refuses the player with that reason (error code 5, `MATCH_JOIN_REJECTED`);
//! 3. [`MatchHandler::join`] / [`MatchHandler::leave`] as players come and go;
//! 4. [`MatchHandler::tick`] at the tick rate, with every input received since the previous tick,
//!    each exactly once, in arrival order; returning [`Flow::End`] ends the match;
//! 5. [`MatchHandler::terminate`] once, when the match ends for any reason.
//!
//! Through the [`MatchContext`] a handler sees the presences and sends `match_data` to all or
//! some of them. A minimal handler that echoes every input back to the whole match:
//!
//! ```
//! use muster::matches::handler::{Flow, Input, MatchContext, MatchHandler, MatchParams, MatchSettings};
//!
//! struct Echo;
//!
//! impl MatchHandler for Echo {
//!     fn init(&mut self, _params: &MatchParams) -> MatchSettings {
//!         MatchSettings { tick_rate_hz: Some(10), ..Default::default() }
//!     }
//!     fn tick(&mut self, ctx: &mut MatchContext<'_>, _tick: u64, inputs: &[Input]) -> Flow {
//!         for input in inputs {
//!             ctx.broadcast(input.op_code, input.data.clone());
//!         }
//!         Flow::Continue
//!     }
//! }
//!
//! let mut handlers = muster::matches::handler::Handlers::builtin();
//! handlers.register("echo", || Box::new(Echo));
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use muster_proto::realtime::{Envelope, MatchData, Message, UserPresence};
use uuid::Uuid;

use super::member::Member;
use crate::session::fanout::Encoded;

/// One message a player sent to the match since the previous tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// The sender's session id (its presence's `session_id`).
    pub from: Uuid,
    pub op_code: i64,
    pub data: Vec<u8>,
    pub reliable: bool,
}

/// What a match is created with.
#[derive(Debug, Clone, Default)]
pub struct MatchParams {
    /// The match's id as clients see it (set by the server when it creates the match).
    pub match_id: String,
    /// Most players at once (the room capacity, or the matched group's size).
    pub capacity: usize,
    /// Free parameters (a room's `params`).
    pub params: HashMap<String, String>,
    /// Players the matchmaker put in this match, before any of them joined.
    pub expected: Vec<UserPresence>,
    /// Structured parameters from server code (a JavaScript module's `nk.matchCreate`), as
    /// given; `params` holds their top-level fields as text.
    pub data: Option<serde_json::Value>,
    /// The tick rate used unless the handler picks one (`matches.tick_rate_hz`).
    pub default_tick_rate_hz: u32,
}

/// A handler's choices at [`MatchHandler::init`].
#[derive(Debug, Clone, Default)]
pub struct MatchSettings {
    /// Ticks per second; `None`: `matches.tick_rate_hz`.
    pub tick_rate_hz: Option<u32>,
    /// Shown to clients in `match` and in room listings.
    pub label: Option<String>,
    /// Keep ticking while nobody is in the match (default false: an empty match sleeps, costing
    /// nothing until a player joins or `matches.empty_timeout_ms` ends it).
    pub tick_when_empty: bool,
}

/// Whether the match goes on after a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    End,
    /// The handler failed: the match ends without its `terminate`, and its players' sockets
    /// are closed so they learn it (as Nakama does).
    Failed,
}

/// The game logic of one authoritative match. See the module documentation for the call order.
pub trait MatchHandler: Send + 'static {
    fn init(&mut self, params: &MatchParams) -> MatchSettings;

    /// Accepts (`Ok`) or refuses (`Err(reason)`) a player; capacity is already checked.
    fn join_attempt(
        &mut self,
        _ctx: &MatchContext<'_>,
        _presence: &UserPresence,
        _metadata: &HashMap<String, String>,
    ) -> Result<(), String> {
        Ok(())
    }

    /// A player joined; they are in `ctx.presences()` already.
    fn join(&mut self, _ctx: &mut MatchContext<'_>, _presence: &UserPresence) {}

    /// A player left (or disconnected); they are no longer in `ctx.presences()`.
    fn leave(&mut self, _ctx: &mut MatchContext<'_>, _presence: &UserPresence) {}

    /// One tick, with every input received since the previous one, each exactly once.
    fn tick(&mut self, ctx: &mut MatchContext<'_>, tick: u64, inputs: &[Input]) -> Flow;

    /// The match is ending (the handler asked, the room was destroyed, it stayed empty, or the
    /// server is shutting down). Messages sent here still reach the players.
    fn terminate(&mut self, _ctx: &mut MatchContext<'_>) {}

    /// A signal from server code (Nakama's `matchSignal`): `Ok(answer)`, or `Err(reason)`
    /// to refuse it.
    fn signal(&mut self, _ctx: &mut MatchContext<'_>, _data: &str) -> Result<String, String> {
        Err("This match takes no signals.".into())
    }

    /// The match's state as text for an operator (the console shows it, as Nakama's console
    /// shows a match's state); `None` when the handler has nothing to show.
    fn state(&mut self) -> Option<String> {
        None
    }
}

/// What a handler sees of its match while it is called.
pub struct MatchContext<'a> {
    pub(super) match_id: &'a str,
    pub(super) members: &'a [Member],
    pub(super) tick_rate_hz: u32,
    /// Messages queued to players during this call (for metrics and tests).
    pub(super) sent: u64,
    /// Sessions the handler removed during this call.
    pub(super) kicked: Vec<Uuid>,
    /// The label the handler set during this call.
    pub(super) label: Option<String>,
}

impl<'a> MatchContext<'a> {
    /// The match id as clients see it.
    pub fn match_id(&self) -> &str {
        self.match_id
    }

    pub fn tick_rate_hz(&self) -> u32 {
        self.tick_rate_hz
    }

    /// Everyone in the match now, in join order.
    pub fn presences(&self) -> impl Iterator<Item = &UserPresence> {
        self.members.iter().map(|m| &m.presence)
    }

    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Removes the player with this session id once the call returns (the others are told, as
    /// when a player leaves, and the handler's `leave` runs).
    pub fn kick(&mut self, session: Uuid) {
        self.kicked.push(session);
    }

    /// Replaces the match's label (shown in listings and to players who join next).
    pub fn set_label(&mut self, label: String) {
        self.label = Some(label);
    }

    /// Sends `match_data` (from the match itself, no sender presence) to every player. The
    /// message is encoded once per wire format, whatever the number of players.
    pub fn broadcast(&mut self, op_code: i64, data: Vec<u8>) {
        self.broadcast_as(op_code, data, true);
    }

    /// [`MatchContext::broadcast`] marked unreliable (`reliable: false`): a state the next tick
    /// supersedes. Transports with an unreliable channel (ENet) send it there, so a lost one is
    /// not resent behind newer ones; reliable streams (TCP, WebSocket) deliver it as any other.
    pub fn broadcast_unreliable(&mut self, op_code: i64, data: Vec<u8>) {
        self.broadcast_as(op_code, data, false);
    }

    fn broadcast_as(&mut self, op_code: i64, data: Vec<u8>, reliable: bool) {
        let encoded = self.encode(op_code, data, reliable);
        for member in self.members {
            member.recipient.deliver(&encoded);
            self.sent += 1;
        }
    }

    /// Sends `match_data` to the players with these session ids only.
    pub fn send_to(&mut self, sessions: &[Uuid], op_code: i64, data: Vec<u8>) {
        let encoded = self.encode(op_code, data, true);
        for member in self.members {
            if sessions.contains(&member.recipient.session_id()) {
                member.recipient.deliver(&encoded);
                self.sent += 1;
            }
        }
    }

    fn encode(&self, op_code: i64, data: Vec<u8>, reliable: bool) -> Encoded {
        Encoded::new(Envelope::new(
            "",
            Message::MatchData(MatchData {
                match_id: self.match_id.to_owned(),
                presence: None,
                op_code,
                data,
                reliable,
            }),
        ))
    }
}

/// Makes a fresh handler for each new match of its kind.
pub type HandlerFactory = Arc<dyn Fn() -> Box<dyn MatchHandler> + Send + Sync>;

/// The registered handlers, by name (the `handler` of a room, `matchmaker.match_handler`).
#[derive(Clone, Default)]
pub struct Handlers {
    factories: HashMap<String, HandlerFactory>,
}

impl Handlers {
    /// Registers (or replaces) the handler called `name`.
    pub fn register<F>(&mut self, name: &str, factory: F)
    where
        F: Fn() -> Box<dyn MatchHandler> + Send + Sync + 'static,
    {
        self.factories.insert(name.to_owned(), Arc::new(factory));
    }

    pub fn get(&self, name: &str) -> Option<HandlerFactory> {
        self.factories.get(name).cloned()
    }

    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<_> = self.factories.keys().cloned().collect();
        names.sort();
        names
    }
}
