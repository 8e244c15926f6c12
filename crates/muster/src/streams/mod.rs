//! Streams: a server module's own channels of realtime delivery (Nakama's streams). A module
//! places sessions on a stream (`nk.streamUserJoin`), lists and counts them, and sends them
//! data (`nk.streamSend`), which arrives as `stream_data`; the members of a stream are told
//! who joins and leaves (`stream_presence_event`, hidden members not announced).
//!
//! A stream is addressed by its mode, subject, subcontext and label. The modes Nakama gives its
//! own features (0-7: notifications, status, chat channels, groups, direct messages, relayed and
//! authoritative matches, parties) are Muster's own services here and are refused: a module
//! reaches those through their `nk` functions.
//!
//! Streams live on the node, for the sessions of this node: a session on another node of a
//! cluster is not found (Nakama's tracker spans the cluster).

use std::collections::HashMap;
use std::sync::Arc;

use muster_proto::realtime::{
    Envelope, Message, Stream, StreamData, StreamPresenceEvent, UserPresence,
};
use parking_lot::Mutex;
use uuid::Uuid;

use crate::session::fanout::Encoded;
use crate::session::registry::{SessionObserver, SessionRegistry};
use crate::session::Session;

/// Most streams one session may be on at once.
pub const MAX_STREAMS_PER_SESSION: usize = 1_000;

/// Longest label, in bytes.
const MAX_LABEL_BYTES: usize = 256;

/// The modes Nakama gives its own features, and what Muster calls them.
const RESERVED_MODES: [&str; 8] = [
    "notifications",
    "status",
    "chat channels",
    "group chat",
    "direct messages",
    "relayed matches",
    "authoritative matches",
    "parties",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("{0}")]
    Invalid(String),
    #[error("session id does not exist")]
    NoSession,
    #[error("the session is on {MAX_STREAMS_PER_SESSION} streams, the most one may be on")]
    TooMany,
}

/// A stream's address, checked: subject and subcontext are UUIDs (or empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamKey {
    pub mode: u8,
    pub subject: Option<Uuid>,
    pub subcontext: Option<Uuid>,
    pub label: String,
}

impl StreamKey {
    /// The address `stream` names, refused when malformed or of one of Nakama's own modes.
    pub fn of(stream: &Stream) -> Result<StreamKey, StreamError> {
        let mode = u8::try_from(stream.mode)
            .map_err(|_| StreamError::Invalid("stream mode must be 0-255".into()))?;
        if let Some(kind) = RESERVED_MODES.get(usize::from(mode)) {
            return Err(StreamError::Invalid(format!(
                "stream mode {mode} is Nakama's {kind}: Muster serves them itself, use a mode of 8 or more for a stream of your own"
            )));
        }
        let id = |text: &str, what: &str| -> Result<Option<Uuid>, StreamError> {
            if text.is_empty() {
                return Ok(None);
            }
            Uuid::parse_str(text).map(Some).map_err(|_| {
                StreamError::Invalid(format!("stream {what} must be a valid identifier"))
            })
        };
        if stream.label.len() > MAX_LABEL_BYTES {
            return Err(StreamError::Invalid(format!(
                "stream label is longer than {MAX_LABEL_BYTES} bytes"
            )));
        }
        Ok(StreamKey {
            mode,
            subject: id(&stream.subject, "subject")?,
            subcontext: id(&stream.subcontext, "subcontext")?,
            label: stream.label.clone(),
        })
    }

    /// The address as the wire carries it.
    pub fn wire(&self) -> Stream {
        Stream {
            mode: i32::from(self.mode),
            subject: self.subject.map(|u| u.to_string()).unwrap_or_default(),
            subcontext: self.subcontext.map(|u| u.to_string()).unwrap_or_default(),
            label: self.label.clone(),
        }
    }
}

/// One session on a stream.
#[derive(Clone)]
struct Member {
    session: Arc<Session>,
    hidden: bool,
    persistence: bool,
    status: String,
    /// Nakama's presence reason: 1 joined, 2 updated.
    reason: u8,
}

impl Member {
    /// The presence as listed: with its persistence and status.
    fn presence(&self) -> UserPresence {
        UserPresence {
            persistence: self.persistence,
            status: (!self.status.is_empty()).then(|| self.status.clone()),
            ..self.session.presence()
        }
    }
}

/// A member as a module sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamMember {
    pub presence: UserPresence,
    pub hidden: bool,
    /// Nakama's presence reason: 1 joined, 2 updated.
    pub reason: u8,
}

#[derive(Default)]
struct State {
    streams: HashMap<StreamKey, Vec<Member>>,
    /// Each session's streams, to bound them and to leave them when it ends.
    of_session: HashMap<Uuid, Vec<StreamKey>>,
}

/// This node's streams.
pub struct Streams {
    sessions: Arc<SessionRegistry>,
    state: Mutex<State>,
}

impl Streams {
    /// Streams of the sessions of `sessions`; a session that ends leaves its streams.
    pub fn new(sessions: Arc<SessionRegistry>) -> Arc<Streams> {
        let streams = Arc::new(Streams {
            sessions: sessions.clone(),
            state: Mutex::default(),
        });
        sessions.on_session_closed(streams.clone());
        streams
    }

    /// Puts session `session_id` of `user_id` on `key` (or changes its flags when already
    /// there): whether it is new there. The members are told, unless it is hidden.
    pub fn join(
        &self,
        key: &StreamKey,
        user_id: Uuid,
        session_id: Uuid,
        hidden: bool,
        persistence: bool,
        status: &str,
    ) -> Result<bool, StreamError> {
        let session = self
            .sessions
            .session(session_id)
            .filter(|s| s.user_id == user_id)
            .ok_or(StreamError::NoSession)?;
        let mut state = self.state.lock();
        let mut member = Member {
            session,
            hidden,
            persistence,
            status: status.to_owned(),
            reason: 1,
        };
        let State {
            streams,
            of_session,
        } = &mut *state;
        let members = streams.entry(key.clone()).or_default();
        if let Some(at) = members
            .iter()
            .position(|m| m.session.session_id == session_id)
        {
            member.reason = 2;
            let old = std::mem::replace(&mut members[at], member.clone());
            announce(key, members, &[&member], &[&old]);
            return Ok(false);
        }
        let keys = of_session.entry(session_id).or_default();
        if keys.len() >= MAX_STREAMS_PER_SESSION {
            if members.is_empty() {
                streams.remove(key);
            }
            return Err(StreamError::TooMany);
        }
        keys.push(key.clone());
        members.push(member.clone());
        announce(key, members, &[&member], &[]);
        Ok(true)
    }

    /// Changes the flags of a session already on `key`.
    pub fn update(
        &self,
        key: &StreamKey,
        user_id: Uuid,
        session_id: Uuid,
        hidden: bool,
        persistence: bool,
        status: &str,
    ) -> Result<(), StreamError> {
        let on = self
            .state
            .lock()
            .streams
            .get(key)
            .is_some_and(|m| m.iter().any(|m| m.session.session_id == session_id));
        if !on {
            return Err(StreamError::Invalid(
                "the session is not on the stream".into(),
            ));
        }
        self.join(key, user_id, session_id, hidden, persistence, status)
            .map(|_| ())
    }

    /// Takes session `session_id` off `key` (nothing when it is not there); the others are
    /// told.
    pub fn leave(&self, key: &StreamKey, session_id: Uuid) {
        let mut state = self.state.lock();
        let State {
            streams,
            of_session,
        } = &mut *state;
        let Some(members) = streams.get_mut(key) else {
            return;
        };
        let Some(at) = members
            .iter()
            .position(|m| m.session.session_id == session_id)
        else {
            return;
        };
        let gone = members.remove(at);
        announce(key, members, &[], &[&gone]);
        if members.is_empty() {
            streams.remove(key);
        }
        if let Some(keys) = of_session.get_mut(&session_id) {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                of_session.remove(&session_id);
            }
        }
    }

    /// The session's membership of `key`, if any.
    pub fn get(&self, key: &StreamKey, session_id: Uuid) -> Option<StreamMember> {
        let state = self.state.lock();
        state.streams.get(key)?.iter().find_map(|m| {
            (m.session.session_id == session_id).then(|| StreamMember {
                presence: m.presence(),
                hidden: m.hidden,
                reason: m.reason,
            })
        })
    }

    /// The members of `key`: hidden ones, not hidden ones, or both.
    pub fn list(&self, key: &StreamKey, hidden: bool, not_hidden: bool) -> Vec<StreamMember> {
        let state = self.state.lock();
        state
            .streams
            .get(key)
            .map(|members| {
                members
                    .iter()
                    .filter(|m| if m.hidden { hidden } else { not_hidden })
                    .map(|m| StreamMember {
                        presence: m.presence(),
                        hidden: m.hidden,
                        reason: m.reason,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// How many sessions are on `key`, hidden ones included.
    pub fn count(&self, key: &StreamKey) -> usize {
        self.state.lock().streams.get(key).map_or(0, Vec::len)
    }

    /// Takes every session off `key`, announcing nothing.
    pub fn close(&self, key: &StreamKey) {
        let mut state = self.state.lock();
        let State {
            streams,
            of_session,
        } = &mut *state;
        for member in streams.remove(key).unwrap_or_default() {
            let session_id = member.session.session_id;
            if let Some(keys) = of_session.get_mut(&session_id) {
                keys.retain(|k| k != key);
                if keys.is_empty() {
                    of_session.remove(&session_id);
                }
            }
        }
    }

    /// Sends `data` (a module's, no sender) as `stream_data` to every member of `key`, or to
    /// the sessions `to` names (on the stream or not, as Nakama sends): how many it reached.
    pub fn send(&self, key: &StreamKey, data: String, to: &[Uuid], reliable: bool) -> usize {
        let message = Encoded::new(Envelope::new(
            "",
            Message::StreamData(StreamData {
                stream: Some(key.wire()),
                sender: None,
                data,
                reliable,
            }),
        ));
        self.deliver(key, &message, to)
    }

    /// Sends `envelope` as it is (a module's own, `nk.streamSendRaw`) to every member of
    /// `key`, or to the sessions `to` names: how many it reached.
    pub fn send_raw(&self, key: &StreamKey, envelope: Envelope, to: &[Uuid]) -> usize {
        self.deliver(key, &Encoded::new(envelope), to)
    }

    fn deliver(&self, key: &StreamKey, message: &Encoded, to: &[Uuid]) -> usize {
        if !to.is_empty() {
            return to
                .iter()
                .filter_map(|id| self.sessions.session(*id))
                .filter(|s| message.deliver(s))
                .count();
        }
        let sessions: Vec<Arc<Session>> = {
            let state = self.state.lock();
            state
                .streams
                .get(key)
                .map(|m| m.iter().map(|m| m.session.clone()).collect())
                .unwrap_or_default()
        };
        sessions.iter().filter(|s| message.deliver(s)).count()
    }
}

/// Tells every member of `key` who joined and left (hidden ones are not named). As Nakama's
/// tracker, an event names the sessions only (no status, no persistence).
fn announce(key: &StreamKey, members: &[Member], joins: &[&Member], leaves: &[&Member]) {
    let named = |list: &[&Member]| -> Vec<UserPresence> {
        list.iter()
            .filter(|m| !m.hidden)
            .map(|m| m.session.presence())
            .collect()
    };
    let (joins, leaves) = (named(joins), named(leaves));
    if joins.is_empty() && leaves.is_empty() {
        return;
    }
    let event = Encoded::new(Envelope::new(
        "",
        Message::StreamPresenceEvent(StreamPresenceEvent {
            stream: Some(key.wire()),
            joins,
            leaves,
        }),
    ));
    for member in members {
        event.deliver(&member.session);
    }
}

impl SessionObserver for Streams {
    fn session_closed(&self, session: &Arc<Session>) {
        let keys = self
            .state
            .lock()
            .of_session
            .get(&session.session_id)
            .cloned()
            .unwrap_or_default();
        for key in keys {
            self.leave(&key, session.session_id);
        }
    }
}
