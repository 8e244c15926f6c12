//! One party's state and rules, as Nakama's party handler has them: the leader alone promotes,
//! accepts, removes, closes, lists join requests and updates; an open party takes whoever
//! joins while it has room, a closed one queues join requests (at most its size) for the
//! leader; a leader who leaves hands over to the oldest member; the last member's leave closes
//! the party. Applying a request answers it and lists what each member is to be sent, so the
//! rules know nothing of sessions, nodes or wires.

use muster_proto::realtime::{
    Message, Party as PartyView, PartyClose, PartyData, PartyJoinRequest, PartyLeader,
    PartyPresenceEvent, UserPresence,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A member or a user asking to join: their presence and the node their session is on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Caller {
    pub presence: UserPresence,
    pub node: String,
}

impl Caller {
    fn is(&self, presence: &UserPresence) -> bool {
        self.presence.session_id == presence.session_id && self.presence.user_id == presence.user_id
    }
}

/// What a member (or a would-be member) asks of the party.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Join,
    Leave,
    Promote(UserPresence),
    Accept(UserPresence),
    Remove(UserPresence),
    Close,
    JoinRequestList,
    Data {
        op_code: i64,
        data: Vec<u8>,
    },
    Update {
        label: String,
        open: bool,
        hidden: bool,
    },
    /// The caller's session ended (or its node died): as a leave, and its join request goes.
    Gone,
    /// The leader asks for a match for the whole party.
    MatchmakerAdd(Matchmake),
    /// The leader withdraws the party's ticket.
    MatchmakerRemove(String),
}

/// A party's matchmaker request, as it travels to the party's node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matchmake {
    pub min_count: i32,
    pub max_count: i32,
    pub query: String,
    pub strings: std::collections::HashMap<String, String>,
    pub numbers: std::collections::HashMap<String, f64>,
}

/// The answer to the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Done,
    /// A join that made the caller a member (the party is sent to them too).
    Joined,
    /// A join that left a request with the leader.
    Requested,
    Leader(PartyLeader),
    Requests(PartyJoinRequest),
    /// A matchmaker request the leader may make: the party's other members.
    Matchmake(Vec<Caller>),
    /// The party's ticket to withdraw: the session that made it, and the ticket.
    Unmatch(Uuid, Uuid),
    /// The party's new ticket.
    Ticket(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum PartyError {
    #[error("party closed")]
    Closed,
    #[error("party full")]
    Full,
    #[error("party join requests full")]
    JoinRequestsFull,
    #[error("party join request duplicate")]
    JoinRequestDuplicate,
    #[error("party join request already member")]
    AlreadyMember,
    #[error("party leader only")]
    NotLeader,
    #[error("party member not found")]
    NotMember,
    #[error("party join request not found")]
    NotRequest,
    #[error("party cannot remove self")]
    RemoveSelf,
    #[error("party is hidden and label is not empty, invalid operation")]
    HiddenWithLabel,
    #[error("party matchmaker ticket not found")]
    TicketNotFound,
}

/// What applying a request did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// To each session: the message it is sent.
    pub sends: Vec<(Uuid, Message)>,
    /// Sessions that joined or asked to join (`true`), or left or stopped asking (`false`),
    /// with their node: their nodes keep track of their parties.
    pub memberships: Vec<(Caller, bool)>,
    /// The party closed (the last member left, or the leader closed it).
    pub closed: bool,
    /// Matchmaker tickets to withdraw (the membership changed): (session, ticket).
    pub dropped_tickets: Vec<(Uuid, Uuid)>,
}

pub struct Party {
    pub id: String,
    pub open: bool,
    pub hidden: bool,
    pub max_size: usize,
    pub label: String,
    /// In the order they joined: the first is the oldest.
    members: Vec<Caller>,
    requests: Vec<Caller>,
    /// The leader's session.
    leader: String,
    closed: bool,
    /// Matchmaker tickets waiting for the party: (the session that made it, ticket).
    tickets: Vec<(Uuid, Uuid)>,
}

fn session_of(caller: &Caller) -> Option<Uuid> {
    Uuid::parse_str(&caller.presence.session_id).ok()
}

impl Party {
    /// A party whose leader and only member is `leader`.
    pub fn new(
        id: String,
        open: bool,
        hidden: bool,
        max_size: usize,
        label: String,
        leader: Caller,
    ) -> Party {
        Party {
            id,
            open,
            hidden,
            max_size,
            label,
            leader: leader.presence.session_id.clone(),
            members: vec![leader],
            requests: Vec::new(),
            closed: false,
            tickets: Vec::new(),
        }
    }

    /// Records the party's new matchmaker ticket, made by `session`.
    pub fn add_ticket(&mut self, session: Uuid, ticket: Uuid) {
        self.tickets.push((session, ticket));
    }

    /// The party as `me` is shown it.
    pub fn view(&self, me: &UserPresence) -> PartyView {
        PartyView {
            party_id: self.id.clone(),
            open: self.open,
            hidden: self.hidden,
            max_size: self.max_size as i32,
            self_presence: Some(me.clone()),
            leader: self.leader_presence(),
            presences: self.members.iter().map(|m| m.presence.clone()).collect(),
            label: self.label.clone(),
        }
    }

    /// The party as an operator sees it (no member's own view), and how many ask to join.
    pub fn operator_view(&self) -> (PartyView, usize) {
        let view = PartyView {
            party_id: self.id.clone(),
            open: self.open,
            hidden: self.hidden,
            max_size: self.max_size as i32,
            self_presence: None,
            leader: self.leader_presence(),
            presences: self.members.iter().map(|m| m.presence.clone()).collect(),
            label: self.label.clone(),
        };
        (view, self.requests.len())
    }

    fn leader_presence(&self) -> Option<UserPresence> {
        self.members
            .iter()
            .find(|m| m.presence.session_id == self.leader)
            .map(|m| m.presence.clone())
    }

    fn is_leader(&self, caller: &Caller) -> bool {
        caller.presence.session_id == self.leader
    }

    fn member_at(&self, presence: &UserPresence) -> Option<usize> {
        self.members.iter().position(|m| m.is(presence))
    }

    /// Sends `message` to every member but `except`.
    fn to_members(&self, outcome: &mut Outcome, message: &Message, except: Option<&str>) {
        for member in &self.members {
            if Some(member.presence.session_id.as_str()) == except {
                continue;
            }
            if let Some(session) = session_of(member) {
                outcome.sends.push((session, message.clone()));
            }
        }
    }

    fn presence_event(&self, joins: Vec<UserPresence>, leaves: Vec<UserPresence>) -> Message {
        Message::PartyPresenceEvent(PartyPresenceEvent {
            party_id: self.id.clone(),
            joins,
            leaves,
        })
    }

    fn close_message(&self) -> Message {
        Message::PartyClose(PartyClose {
            party_id: self.id.clone(),
        })
    }

    /// Applies `op` from `caller`.
    pub fn apply(&mut self, caller: Caller, op: Op) -> Result<(Reply, Outcome), PartyError> {
        if self.closed {
            return Err(PartyError::Closed);
        }
        let mut outcome = Outcome::default();
        let members_before = self.members.len();
        let leader_only = matches!(
            op,
            Op::Promote(_)
                | Op::Accept(_)
                | Op::Remove(_)
                | Op::Close
                | Op::JoinRequestList
                | Op::Update { .. }
                | Op::MatchmakerAdd(_)
                | Op::MatchmakerRemove(_)
        );
        if leader_only && !self.is_leader(&caller) {
            return Err(PartyError::NotLeader);
        }
        let reply = match op {
            Op::Join => self.join(caller, &mut outcome)?,
            Op::Leave | Op::Gone => {
                self.requests.retain(|r| {
                    let asking = r.is(&caller.presence);
                    if asking {
                        outcome.memberships.push((r.clone(), false));
                    }
                    !asking
                });
                if let Some(at) = self.member_at(&caller.presence) {
                    self.leave(at, &mut outcome);
                }
                Reply::Done
            }
            Op::Promote(target) => {
                let at = self.member_at(&target).ok_or(PartyError::NotMember)?;
                self.leader = self.members[at].presence.session_id.clone();
                let leader = PartyLeader {
                    party_id: self.id.clone(),
                    presence: self.leader_presence(),
                };
                self.to_members(
                    &mut outcome,
                    &Message::PartyLeader(leader.clone()),
                    Some(&caller.presence.session_id),
                );
                Reply::Leader(leader)
            }
            Op::Accept(target) => {
                if self.members.len() >= self.max_size {
                    return Err(PartyError::Full);
                }
                let at = self
                    .requests
                    .iter()
                    .position(|r| r.is(&target))
                    .ok_or(PartyError::NotRequest)?;
                let joiner = self.requests.remove(at);
                self.admit(joiner, &mut outcome);
                Reply::Done
            }
            Op::Remove(target) => {
                if caller.is(&target) {
                    return Err(PartyError::RemoveSelf);
                }
                if let Some(at) = self.member_at(&target) {
                    let removed = self.members[at].clone();
                    if let Some(session) = session_of(&removed) {
                        outcome.sends.push((session, self.close_message()));
                    }
                    self.leave(at, &mut outcome);
                } else {
                    let at = self
                        .requests
                        .iter()
                        .position(|r| r.is(&target))
                        .ok_or(PartyError::NotMember)?;
                    let rejected = self.requests.remove(at);
                    outcome.memberships.push((rejected, false));
                }
                Reply::Done
            }
            Op::Close => {
                let close = self.close_message();
                self.to_members(&mut outcome, &close, None);
                for member in self.members.drain(..).chain(self.requests.drain(..)) {
                    outcome.memberships.push((member, false));
                }
                self.closed = true;
                outcome.closed = true;
                Reply::Done
            }
            Op::JoinRequestList => Reply::Requests(PartyJoinRequest {
                party_id: self.id.clone(),
                presences: self.requests.iter().map(|r| r.presence.clone()).collect(),
            }),
            Op::Data { op_code, data } => {
                if self.member_at(&caller.presence).is_none() {
                    return Err(PartyError::NotMember);
                }
                let message = Message::PartyData(PartyData {
                    party_id: self.id.clone(),
                    presence: Some(caller.presence.clone()),
                    op_code,
                    data,
                });
                self.to_members(&mut outcome, &message, Some(&caller.presence.session_id));
                Reply::Done
            }
            Op::MatchmakerAdd(_) => Reply::Matchmake(
                self.members
                    .iter()
                    .filter(|m| m.presence.session_id != self.leader)
                    .cloned()
                    .collect(),
            ),
            Op::MatchmakerRemove(ticket) => {
                let at = self
                    .tickets
                    .iter()
                    .position(|(_, t)| t.to_string() == ticket)
                    .ok_or(PartyError::TicketNotFound)?;
                let (session, ticket) = self.tickets.remove(at);
                Reply::Unmatch(session, ticket)
            }
            Op::Update {
                label,
                open,
                hidden,
            } => {
                if hidden && !label.is_empty() {
                    return Err(PartyError::HiddenWithLabel);
                }
                self.label = label;
                self.open = open;
                self.hidden = hidden;
                Reply::Done
            }
        };
        if self.members.len() != members_before || outcome.closed {
            // Nakama's rule: a party whose members change stops looking for a match.
            outcome.dropped_tickets.append(&mut self.tickets);
        }
        Ok((reply, outcome))
    }

    fn join(&mut self, caller: Caller, outcome: &mut Outcome) -> Result<Reply, PartyError> {
        if self.member_at(&caller.presence).is_some() {
            if self.open {
                return Ok(Reply::Joined);
            }
            return Err(PartyError::AlreadyMember);
        }
        if self.members.len() >= self.max_size {
            return Err(PartyError::Full);
        }
        if self.open {
            self.admit(caller, outcome);
            return Ok(Reply::Joined);
        }
        if self.requests.len() >= self.max_size {
            return Err(PartyError::JoinRequestsFull);
        }
        if self
            .requests
            .iter()
            .any(|r| r.presence.user_id == caller.presence.user_id)
        {
            return Err(PartyError::JoinRequestDuplicate);
        }
        if self
            .members
            .iter()
            .any(|m| m.presence.user_id == caller.presence.user_id)
        {
            return Err(PartyError::AlreadyMember);
        }
        let request = Message::PartyJoinRequest(PartyJoinRequest {
            party_id: self.id.clone(),
            presences: vec![caller.presence.clone()],
        });
        if let Some(leader) = self
            .members
            .iter()
            .find(|m| m.presence.session_id == self.leader)
            .and_then(session_of)
        {
            outcome.sends.push((leader, request));
        }
        outcome.memberships.push((caller.clone(), true));
        self.requests.push(caller);
        Ok(Reply::Requested)
    }

    /// `joiner` becomes a member: they are sent the party, then every member — the joiner
    /// too, as Nakama's tracker does — the join.
    fn admit(&mut self, joiner: Caller, outcome: &mut Outcome) {
        self.members.push(joiner.clone());
        if let Some(session) = session_of(&joiner) {
            outcome
                .sends
                .push((session, Message::Party(self.view(&joiner.presence))));
        }
        let event = self.joined(&joiner.presence);
        self.to_members(outcome, &event, None);
        outcome.memberships.push((joiner, true));
    }

    /// The `party_presence_event` naming `presence` as joined (a creator is sent one naming
    /// itself after its `party`, as on Nakama).
    pub fn joined(&self, presence: &UserPresence) -> Message {
        self.presence_event(vec![presence.clone()], Vec::new())
    }

    /// The member at `at` leaves: the others are told; a leader hands over to the oldest
    /// member left; the last member closes the party.
    fn leave(&mut self, at: usize, outcome: &mut Outcome) {
        let gone = self.members.remove(at);
        outcome.memberships.push((gone.clone(), false));
        if self.members.is_empty() {
            for request in self.requests.drain(..) {
                outcome.memberships.push((request, false));
            }
            self.closed = true;
            outcome.closed = true;
            return;
        }
        let event = self.presence_event(Vec::new(), vec![gone.presence.clone()]);
        self.to_members(outcome, &event, None);
        if gone.presence.session_id == self.leader {
            self.leader = self.members[0].presence.session_id.clone();
            let leader = Message::PartyLeader(PartyLeader {
                party_id: self.id.clone(),
                presence: self.leader_presence(),
            });
            self.to_members(outcome, &leader, None);
        }
    }

    /// Every member and request on `node` (a node that died) leaves.
    pub fn drop_node(&mut self, node: &str, outcome: &mut Outcome) {
        let gone: Vec<Caller> = self
            .members
            .iter()
            .chain(&self.requests)
            .filter(|m| m.node == node)
            .cloned()
            .collect();
        for caller in gone {
            if self.closed {
                break;
            }
            if let Ok((_, more)) = self.apply(caller, Op::Gone) {
                outcome.sends.extend(more.sends);
                outcome.memberships.extend(more.memberships);
                outcome.dropped_tickets.extend(more.dropped_tickets);
                outcome.closed |= more.closed;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str) -> Caller {
        Caller {
            presence: UserPresence {
                user_id: Uuid::new_v4().to_string(),
                session_id: Uuid::new_v4().to_string(),
                username: name.into(),
                ..UserPresence::default()
            },
            node: "a".into(),
        }
    }

    /// As Nakama's tracker: every member is told of a join, the joiner too (after its `party`).
    #[test]
    fn a_joiner_is_told_of_its_own_join_after_its_party() {
        let (leader, bob) = (caller("leader"), caller("bob"));
        let mut party = Party::new("p.a".into(), true, false, 4, String::new(), leader.clone());
        let (reply, outcome) = party.apply(bob.clone(), Op::Join).unwrap();
        assert_eq!(reply, Reply::Joined);
        let to = |who: &Caller| -> Vec<&Message> {
            let session = session_of(who).unwrap();
            outcome
                .sends
                .iter()
                .filter(|(s, _)| *s == session)
                .map(|(_, m)| m)
                .collect()
        };
        let bobs = to(&bob);
        assert!(matches!(bobs[0], Message::Party(_)), "{bobs:?}");
        let Message::PartyPresenceEvent(event) = bobs[1] else {
            panic!("{bobs:?}")
        };
        assert_eq!(event.joins, vec![bob.presence.clone()]);
        let Message::PartyPresenceEvent(event) = to(&leader)[0] else {
            panic!("the leader is told")
        };
        assert_eq!(event.joins, vec![bob.presence.clone()]);
    }

    #[test]
    fn a_closed_party_queues_requests_for_its_leader_and_hands_over_when_the_leader_leaves() {
        let (leader, bob, carol) = (caller("leader"), caller("bob"), caller("carol"));
        let mut party = Party::new("p.a".into(), false, false, 2, String::new(), leader.clone());
        let (reply, outcome) = party.apply(bob.clone(), Op::Join).unwrap();
        assert_eq!(reply, Reply::Requested);
        assert!(matches!(outcome.sends[0].1, Message::PartyJoinRequest(_)));
        assert_eq!(
            party.apply(bob.clone(), Op::Join).unwrap_err(),
            PartyError::JoinRequestDuplicate
        );
        assert_eq!(
            party
                .apply(bob.clone(), Op::Accept(bob.presence.clone()))
                .unwrap_err(),
            PartyError::NotLeader
        );
        party
            .apply(leader.clone(), Op::Accept(bob.presence.clone()))
            .unwrap();
        assert_eq!(
            party.apply(carol.clone(), Op::Join).unwrap_err(),
            PartyError::Full
        );
        let data = Op::Data {
            op_code: 1,
            data: vec![1],
        };
        assert_eq!(party.apply(carol, data).unwrap_err(), PartyError::NotMember);
        let (_, outcome) = party.apply(leader.clone(), Op::Leave).unwrap();
        assert_eq!(party.leader, bob.presence.session_id);
        assert!(outcome
            .sends
            .iter()
            .any(|(_, m)| matches!(m, Message::PartyLeader(_))));
        let (_, outcome) = party.apply(bob, Op::Leave).unwrap();
        assert!(outcome.closed, "the last member's leave closes it");
    }
}
