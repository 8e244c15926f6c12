//! Relayed matches: the server keeps the member list and forwards `match_data` between members;
//! the game logic runs in the clients.
//!
//! Why no task per relayed match: a relayed match has no clock and no logic, only a member list
//! read on every message. The sender's own socket task does the forwarding under a read lock of
//! that one list (never held across an await, never shared with another match), which costs one
//! encode per wire format plus a queue push per recipient, and no extra hop through a channel.
//! Joins and leaves take the write lock, so presence events and data reach members in one
//! consistent order: nobody receives data from a member before that member's join event.

use std::sync::Arc;

use muster_proto::realtime::{
    Envelope, Match, MatchData, MatchPresenceEvent, Message, UserPresence,
};
use parking_lot::RwLock;
use uuid::Uuid;

use super::error::MatchError;
use super::id::MatchId;
use super::member::Member;
use crate::session::fanout::Encoded;

pub struct RelayedMatch {
    pub id: MatchId,
    /// The id as clients see it (`{uuid}.`).
    pub id_text: String,
    /// The name it was created with, if any (`match_create { name }`).
    pub name: Option<String>,
    state: RwLock<State>,
}

struct State {
    members: Vec<Member>,
    ended: bool,
}

/// What a successful join did.
pub struct Joined {
    pub reply: Match,
    /// False when the session was already a member (the join changed nothing).
    pub new: bool,
}

impl RelayedMatch {
    pub fn new(id: MatchId, name: Option<String>) -> Arc<RelayedMatch> {
        Arc::new(RelayedMatch {
            id_text: id.display(""),
            id,
            name,
            state: RwLock::new(State {
                members: Vec::new(),
                ended: false,
            }),
        })
    }

    /// Adds `member`, tells every member (the joiner too, as Nakama's tracker does), and returns
    /// the `match` answer for the joiner: the others for a new join, everyone for a member
    /// joining again; `size` counts those listed.
    pub fn join(&self, member: Member, max_size: usize) -> Result<Joined, MatchError> {
        let mut state = self.state.write();
        if state.ended {
            return Err(MatchError::Ended("Match has ended.".into()));
        }
        let session = member.recipient.session_id();
        let new = state
            .members
            .iter()
            .all(|m| m.recipient.session_id() != session);
        if new {
            if state.members.len() >= max_size {
                return Err(MatchError::Rejected("Match is full.".into()));
            }
            state.members.push(member.clone());
            let event = self.presence_event(vec![member.presence.clone()], Vec::new());
            for each in &state.members {
                each.recipient.deliver(&event);
            }
        }
        let presences: Vec<UserPresence> = state
            .members
            .iter()
            .filter(|m| !new || m.recipient.session_id() != session)
            .map(|m| m.presence.clone())
            .collect();
        let reply = Match {
            match_id: self.id_text.clone(),
            authoritative: false,
            label: None,
            size: presences.len() as i32,
            presences,
            self_presence: Some(member.presence),
        };
        Ok(Joined { reply, new })
    }

    /// Removes `session`, tells the others; `Some(true)` when the match is now empty (and ended),
    /// `None` when the session was not a member.
    pub fn leave(&self, session: Uuid) -> Option<bool> {
        let mut state = self.state.write();
        let index = state
            .members
            .iter()
            .position(|m| m.recipient.session_id() == session)?;
        let gone = state.members.remove(index);
        if state.members.is_empty() {
            state.ended = true;
            return Some(true);
        }
        let event = self.presence_event(Vec::new(), vec![gone.presence]);
        for other in &state.members {
            other.recipient.deliver(&event);
        }
        Some(false)
    }

    /// Forwards data from the member `from` to every other member, or only to the members named
    /// in `to` (by session id). Returns how many it reached.
    pub fn send(
        &self,
        from: Uuid,
        op_code: i64,
        data: Vec<u8>,
        to: &[UserPresence],
        reliable: bool,
    ) -> usize {
        let state = self.state.read();
        let Some(sender) = state
            .members
            .iter()
            .find(|m| m.recipient.session_id() == from)
        else {
            return 0;
        };
        let encoded = Encoded::new(Envelope::new(
            "",
            Message::MatchData(MatchData {
                match_id: self.id_text.clone(),
                presence: Some(sender.presence.clone()),
                op_code,
                data,
                reliable,
            }),
        ));
        let mut reached = 0;
        for member in &state.members {
            let wanted = if to.is_empty() {
                member.recipient.session_id() != from
            } else {
                to.iter()
                    .any(|p| p.session_id == member.presence.session_id)
            };
            if wanted && member.recipient.deliver(&encoded) {
                reached += 1;
            }
        }
        reached
    }

    pub fn size(&self) -> usize {
        self.state.read().members.len()
    }

    /// Everyone in the match now, in join order.
    pub fn presences(&self) -> Vec<UserPresence> {
        let state = self.state.read();
        state.members.iter().map(|m| m.presence.clone()).collect()
    }

    fn presence_event(&self, joins: Vec<UserPresence>, leaves: Vec<UserPresence>) -> Encoded {
        Encoded::new(Envelope::new(
            "",
            Message::MatchPresenceEvent(MatchPresenceEvent {
                match_id: self.id_text.clone(),
                joins,
                leaves,
            }),
        ))
    }
}
