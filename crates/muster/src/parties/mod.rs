//! Parties, as Nakama has them (`party_create`, `party_join`, `party_leave`, `party_promote`,
//! `party_accept`, `party_remove`, `party_close`, `party_join_request_list`,
//! `party_data_send`, `party_update`), across the nodes of a cluster.
//!
//! A party lives on the node of the session that created it; its id says which
//! (`{uuid}.{node}`). A request from a session on another node goes to the owner over the bus
//! (`node.<owner>.party`, request and reply); the owner applies it (`party::Party::apply`) and
//! sends each member what it is to be told through the router, wherever the member is. Each
//! node keeps, for its own sessions, the parties they are in or asking to join (the owner tells
//! it of every change on `node.<node>.party.members`), so that a session that ends leaves its
//! parties, and a node that dies takes its members out of every party (the owner sees it go)
//! and its parties away from their members (each is sent `party_close`).

pub mod config;
pub(crate) mod party;

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use futures_util::StreamExt as _;
use muster_proto::realtime::{
    Envelope, MatchmakerAdd, Message, PartyClose, PartyCreate, PartyMatchmakerTicket, UserPresence,
};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cluster::bus::Bus;
use crate::cluster::membership::{Departure, MembershipObserver};
use crate::cluster::{Recipient, Router};
use crate::matches::matchmaker::PartyMember;
use crate::matches::Matches;
use crate::parties::config::PartiesConfig;
use crate::session::fanout::Encoded;
use crate::session::registry::SessionObserver;
use crate::session::{Answer, Session, SessionRegistry};
use party::{Caller, Matchmake, Op, Outcome, Party, PartyError, Reply};

/// How long a request waits for the party's node.
const REMOTE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest label, in bytes.
pub const MAX_LABEL_BYTES: usize = 2048;
/// Largest party (Nakama's bound).
pub const MAX_SIZE: usize = 256;

fn requests_topic(node: &str) -> String {
    format!("node.{node}.party")
}

fn memberships_topic(node: &str) -> String {
    format!("node.{node}.party.members")
}

/// Why a party request was refused.
#[derive(Debug, thiserror::Error)]
pub enum PartiesError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Party(#[from] PartyError),
    #[error("party not found")]
    NotFound,
    /// The session is in (or asking to join) `parties.max_per_session` parties.
    #[error("Too many parties on this socket (at most {0}); leave one first.")]
    TooMany(usize),
    #[error("the party's node did not answer: {0}")]
    Unreachable(String),
    /// The matchmaker refused the party's ticket.
    #[error("{0}")]
    Matchmaker(String),
}

impl PartiesError {
    pub fn reason(&self) -> &'static str {
        match self {
            PartiesError::Invalid(_) => "invalid",
            PartiesError::Party(_) => "party",
            PartiesError::NotFound => "not_found",
            PartiesError::TooMany(_) => "too_many_parties",
            PartiesError::Unreachable(_) => "unreachable",
            PartiesError::Matchmaker(_) => "matchmaker",
        }
    }
}

/// A party a session of this node is in or asking to join.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PartyRef {
    id: Uuid,
    owner: String,
}

impl PartyRef {
    fn party_id(&self) -> String {
        format!("{}.{}", self.id, self.owner)
    }

    fn parse(text: &str) -> Option<PartyRef> {
        let (id, owner) = text.split_once('.')?;
        if owner.is_empty() || owner.len() > 128 {
            return None;
        }
        Some(PartyRef {
            id: Uuid::parse_str(id).ok()?,
            owner: owner.to_owned(),
        })
    }
}

/// A request as it travels to the party's node.
#[derive(Debug, Serialize, Deserialize)]
struct Request {
    party: Uuid,
    caller: Caller,
    op: Op,
}

impl crate::cluster::protocol::Message for Request {
    const KIND: &'static str = "parties.request";
}

/// A change of one of the receiving node's sessions' parties.
#[derive(Debug, Serialize, Deserialize)]
struct MembershipNote {
    session: Uuid,
    party: PartyRef,
    joined: bool,
}

impl crate::cluster::protocol::Message for MembershipNote {
    const KIND: &'static str = "parties.membership";
}

pub struct Parties {
    node: String,
    router: Arc<dyn Router>,
    registry: Arc<SessionRegistry>,
    matches: Arc<Matches>,
    bus: Option<Bus>,
    config: PartiesConfig,
    /// The parties this node owns.
    owned: DashMap<Uuid, Arc<Mutex<Party>>>,
    /// This node's sessions' parties (member or asking to join).
    mine: DashMap<Uuid, Vec<PartyRef>>,
}

impl Parties {
    pub fn new(
        router: Arc<dyn Router>,
        registry: Arc<SessionRegistry>,
        matches: Arc<Matches>,
        bus: Option<Bus>,
        config: &PartiesConfig,
    ) -> Arc<Parties> {
        Arc::new(Parties {
            node: matches.node().to_owned(),
            router,
            registry,
            matches,
            bus,
            config: config.clone(),
            owned: DashMap::new(),
            mine: DashMap::new(),
        })
    }

    /// Serves other nodes' requests for this node's parties and their notes about this node's
    /// sessions; runs until the bus closes.
    pub async fn follow(self: &Arc<Self>) -> anyhow::Result<()> {
        let Some(bus) = self.bus.clone() else {
            return Ok(());
        };
        let mut requests = bus.subscribe(&requests_topic(&self.node)).await?;
        let mut notes = bus.subscribe(&memberships_topic(&self.node)).await?;
        let parties = self.clone();
        tokio::spawn(async move {
            while let Some(message) = requests.next().await {
                let request = match crate::cluster::protocol::decode::<Request>(&message.payload) {
                    Ok(request) => request,
                    Err(e) => {
                        tracing::warn!("cluster: unreadable party request: {e}");
                        continue;
                    }
                };
                let (parties, bus) = (parties.clone(), bus.clone());
                tokio::spawn(async move {
                    let answer = parties
                        .serve(request.party, request.caller, request.op)
                        .await
                        .map_err(Refused::from);
                    if let Some(to) = message.reply {
                        bus.answer(to, &OwnerAnswer(answer)).await;
                    }
                });
            }
        });
        let parties = self.clone();
        tokio::spawn(async move {
            while let Some(message) = notes.next().await {
                match crate::cluster::protocol::decode::<MembershipNote>(&message.payload) {
                    Ok(note) => parties.note(note),
                    Err(e) => tracing::warn!("cluster: unreadable party note: {e}"),
                }
            }
        });
        Ok(())
    }

    /// `session` as a party sees it: its presence and this node.
    fn caller(&self, session: &Session) -> Caller {
        Caller {
            presence: UserPresence {
                user_id: session.user_id.to_string(),
                session_id: session.session_id.to_string(),
                username: session.username.to_string(),
                ..UserPresence::default()
            },
            node: self.node.clone(),
        }
    }

    /// Answers one party request from `session`.
    pub async fn handle(
        &self,
        message: Message,
        session: &Arc<Session>,
    ) -> Result<Answer, PartiesError> {
        let caller = self.caller(session);
        let (party_id, op) = match message {
            Message::PartyCreate(create) => return self.create(session, caller, create),
            Message::PartyJoin(m) => (m.party_id, Op::Join),
            Message::PartyLeave(m) => (m.party_id, Op::Leave),
            Message::PartyPromote(m) => (m.party_id, Op::Promote(presence(m.presence)?)),
            Message::PartyAccept(m) => (m.party_id, Op::Accept(presence(m.presence)?)),
            Message::PartyRemove(m) => (m.party_id, Op::Remove(presence(m.presence)?)),
            Message::PartyClose(m) => (m.party_id, Op::Close),
            Message::PartyJoinRequestList(m) => (m.party_id, Op::JoinRequestList),
            Message::PartyDataSend(m) => (
                m.party_id,
                Op::Data {
                    op_code: m.op_code,
                    data: m.data,
                },
            ),
            Message::PartyMatchmakerAdd(m) => (
                m.party_id,
                Op::MatchmakerAdd(Matchmake {
                    min_count: m.min_count,
                    max_count: m.max_count,
                    query: m.query,
                    strings: m.string_properties,
                    numbers: m.numeric_properties,
                }),
            ),
            Message::PartyMatchmakerRemove(m) => (m.party_id, Op::MatchmakerRemove(m.ticket)),
            Message::PartyUpdate(m) => {
                check_label(&m.label)?;
                (
                    m.party_id,
                    Op::Update {
                        label: m.label,
                        open: m.open,
                        hidden: m.hidden,
                    },
                )
            }
            other => {
                tracing::error!(kind = other.kind(), "not a party request");
                return Ok(Answer::Silent);
            }
        };
        let party = PartyRef::parse(&party_id)
            .ok_or_else(|| PartiesError::Invalid("Invalid party ID".into()))?;
        if matches!(op, Op::Join) {
            self.check_room(session.session_id, &party)?;
        }
        let reply = if party.owner == self.node {
            self.serve(party.id, caller, op).await?
        } else {
            let reply = self.ask(&party, caller, op).await?;
            // The owner tells this node of the membership over the bus too, but that note can
            // arrive after the player has seen the party, or never, if the owner dies first:
            // recorded here before the join is answered, so that the owner's death closes the
            // party for this session whatever became of the note.
            if matches!(reply, Reply::Joined) {
                self.note(MembershipNote {
                    session: session.session_id,
                    party: party.clone(),
                    joined: true,
                });
            }
            reply
        };
        Ok(match reply {
            Reply::Leader(leader) => Answer::Reply(Message::PartyLeader(leader)),
            Reply::Requests(requests) => Answer::Reply(Message::PartyJoinRequest(requests)),
            Reply::Ticket(ticket) => {
                Answer::Reply(Message::PartyMatchmakerTicket(PartyMatchmakerTicket {
                    party_id: party.party_id(),
                    ticket,
                }))
            }
            _ => Answer::Done,
        })
    }

    /// Serves a request for a party this node owns: the rules, then the matchmaker when the
    /// leader asked for it.
    async fn serve(&self, id: Uuid, caller: Caller, op: Op) -> Result<Reply, PartiesError> {
        let matchmake = match &op {
            Op::MatchmakerAdd(request) => Some(request.clone()),
            _ => None,
        };
        match self.apply(id, caller.clone(), op)? {
            Reply::Matchmake(members) => {
                let request = matchmake.ok_or(PartiesError::NotFound)?;
                self.matchmake(id, caller, members, request).await
            }
            Reply::Unmatch(session, ticket) => {
                self.matches
                    .matchmaker
                    .remove(session, &ticket.to_string())
                    .await
                    .map_err(|e| PartiesError::Matchmaker(e.to_string()))?;
                Ok(Reply::Done)
            }
            other => Ok(other),
        }
    }

    /// Queues the party's ticket and tells its members of it.
    async fn matchmake(
        &self,
        id: Uuid,
        leader: Caller,
        members: Vec<Caller>,
        request: Matchmake,
    ) -> Result<Reply, PartiesError> {
        let party_id = PartyRef {
            id,
            owner: self.node.clone(),
        }
        .party_id();
        let leader_recipient = self.recipient(&leader).ok_or(PartiesError::NotFound)?;
        let others = members
            .iter()
            .map(|m| PartyMember {
                recipient: self.recipient(m),
                presence: m.presence.clone(),
            })
            .collect();
        let add = MatchmakerAdd {
            min_count: request.min_count,
            max_count: request.max_count,
            query: request.query,
            string_properties: request.strings,
            numeric_properties: request.numbers,
        };
        let session = leader_recipient.session_id();
        let ticket = self
            .matches
            .matchmaker
            .add_party(leader_recipient, &party_id, others, add)
            .await
            .map_err(|e| PartiesError::Matchmaker(e.to_string()))?
            .ticket;
        let Some(party) = self.owned.get(&id).map(|p| p.value().clone()) else {
            return Err(PartiesError::NotFound);
        };
        if let Ok(ticket) = Uuid::parse_str(&ticket) {
            party.lock().add_ticket(session, ticket);
        }
        let told = Encoded::new(Envelope::new(
            String::new(),
            Message::PartyMatchmakerTicket(PartyMatchmakerTicket {
                party_id,
                ticket: ticket.clone(),
            }),
        ));
        for member in &members {
            if let Ok(session) = Uuid::parse_str(&member.presence.session_id) {
                self.router.send_to_session(session, &told);
            }
        }
        Ok(Reply::Ticket(ticket))
    }

    /// Where to tell a member of a match: its session here, or on its node.
    fn recipient(&self, member: &Caller) -> Option<Recipient> {
        let session = Uuid::parse_str(&member.presence.session_id).ok()?;
        if member.node == self.node {
            return self.registry.session(session).map(|s| Recipient::local(&s));
        }
        let user = Uuid::parse_str(&member.presence.user_id).ok()?;
        Recipient::remote(
            member.presence.clone(),
            user,
            &member.node,
            self.bus.as_ref()?,
        )
    }

    fn create(
        &self,
        session: &Arc<Session>,
        caller: Caller,
        create: PartyCreate,
    ) -> Result<Answer, PartiesError> {
        let max_size = match create.max_size {
            0 => MAX_SIZE,
            n if (1..=MAX_SIZE as i32).contains(&n) => n as usize,
            _ => {
                return Err(PartiesError::Invalid(
                    "Invalid party max size, must be 1-256".into(),
                ))
            }
        };
        check_label(&create.label)?;
        if create.hidden && !create.label.is_empty() {
            return Err(PartyError::HiddenWithLabel.into());
        }
        let party = PartyRef {
            id: Uuid::new_v4(),
            owner: self.node.clone(),
        };
        self.check_room(session.session_id, &party)?;
        let state = Party::new(
            party.party_id(),
            create.open,
            create.hidden,
            max_size,
            create.label,
            caller.clone(),
        );
        let view = state.view(&caller.presence);
        // Queued behind the answer: the creator's own join, as Nakama's tracker sends it.
        let joined = state.joined(&caller.presence);
        self.owned.insert(party.id, Arc::new(Mutex::new(state)));
        self.mine.entry(session.session_id).or_default().push(party);
        self.router.send_to_session(
            session.session_id,
            &Encoded::new(Envelope::new(String::new(), joined)),
        );
        Ok(Answer::Reply(Message::Party(view)))
    }

    /// Refuses a session already in (or asking to join) `parties.max_per_session` parties.
    fn check_room(&self, session: Uuid, party: &PartyRef) -> Result<(), PartiesError> {
        let max = self.config.max_per_session;
        let count = self
            .mine
            .get(&session)
            .map_or(0, |refs| refs.iter().filter(|r| *r != party).count());
        if count >= max {
            return Err(PartiesError::TooMany(max));
        }
        Ok(())
    }

    /// Applies a request to a party this node owns, and sends what it says to send.
    fn apply(&self, id: Uuid, caller: Caller, op: Op) -> Result<Reply, PartiesError> {
        let party = self
            .owned
            .get(&id)
            .map(|p| p.value().clone())
            .ok_or(PartiesError::NotFound)?;
        let (reply, outcome) = party.lock().apply(caller, op)?;
        if outcome.closed {
            self.owned.remove(&id);
        }
        self.carry_out(id, outcome);
        Ok(reply)
    }

    fn carry_out(&self, id: Uuid, outcome: Outcome) {
        if !outcome.dropped_tickets.is_empty() {
            let matches = self.matches.clone();
            let dropped = outcome.dropped_tickets.clone();
            tokio::spawn(async move {
                for (session, ticket) in dropped {
                    // Already matched or gone: nothing to withdraw.
                    let _ = matches
                        .matchmaker
                        .remove(session, &ticket.to_string())
                        .await;
                }
            });
        }
        for (session, message) in outcome.sends {
            let encoded = Encoded::new(Envelope::new(String::new(), message));
            self.router.send_to_session(session, &encoded);
        }
        let party = PartyRef {
            id,
            owner: self.node.clone(),
        };
        for (caller, joined) in outcome.memberships {
            let Ok(session) = Uuid::parse_str(&caller.presence.session_id) else {
                continue;
            };
            let note = MembershipNote {
                session,
                party: party.clone(),
                joined,
            };
            if caller.node == self.node {
                self.note(note);
            } else if let Some(bus) = &self.bus {
                bus.send_soon(&memberships_topic(&caller.node), &note);
            }
        }
    }

    /// Records a change of one of this node's sessions' parties.
    fn note(&self, note: MembershipNote) {
        if note.joined {
            let mut refs = self.mine.entry(note.session).or_default();
            if !refs.contains(&note.party) {
                refs.push(note.party);
            }
        } else {
            let empty = self.mine.get_mut(&note.session).is_some_and(|mut refs| {
                refs.retain(|r| *r != note.party);
                refs.is_empty()
            });
            if empty {
                self.mine
                    .remove_if(&note.session, |_, refs| refs.is_empty());
            }
        }
    }

    /// Sends a request to the party's node and waits for its answer.
    async fn ask(&self, party: &PartyRef, caller: Caller, op: Op) -> Result<Reply, PartiesError> {
        let bus = self.bus.as_ref().ok_or(PartiesError::NotFound)?;
        let request = Request {
            party: party.id,
            caller,
            op,
        };
        let OwnerAnswer(answer) = bus
            .ask(&requests_topic(&party.owner), &request, REMOTE_TIMEOUT)
            .await
            .map_err(|e| PartiesError::Unreachable(e.to_string()))?;
        answer.map_err(PartiesError::from)
    }

    /// Up to `limit` of the parties this node owns, as an operator sees them (the console),
    /// each with how many ask to join.
    pub fn owned_views(&self, limit: usize) -> Vec<(muster_proto::realtime::Party, usize)> {
        self.owned
            .iter()
            .take(limit)
            .map(|party| party.lock().operator_view())
            .collect()
    }

    /// The parties this node owns whose ids follow `after` (all when `None`), in the order of
    /// their ids, that `keep` accepts: at most `limit` of them, and whether more follow.
    pub fn list_owned(
        &self,
        after: Option<Uuid>,
        limit: usize,
        keep: impl Fn(&OwnedParty) -> bool,
    ) -> (Vec<OwnedParty>, bool) {
        let mut ids: Vec<Uuid> = self
            .owned
            .iter()
            .map(|p| *p.key())
            .filter(|id| after.is_none_or(|after| *id > after))
            .collect();
        ids.sort_unstable();
        let mut found = Vec::new();
        for id in ids {
            let Some(party) = self.owned.get(&id).map(|p| p.value().clone()) else {
                continue;
            };
            let party = {
                let party = party.lock();
                OwnedParty {
                    key: id,
                    id: party.id.clone(),
                    open: party.open,
                    hidden: party.hidden,
                    max_size: party.max_size,
                    label: party.label.clone(),
                }
            };
            if !keep(&party) {
                continue;
            }
            if found.len() == limit {
                return (found, true);
            }
            found.push(party);
        }
        (found, false)
    }

    /// Parties this node owns now (metrics).
    pub fn owned_count(&self) -> usize {
        self.owned.len()
    }
}

/// One of this node's parties as a listing shows it ([`Parties::list_owned`]).
#[derive(Debug, Clone)]
pub struct OwnedParty {
    /// The key this node holds it by (the first part of its id).
    pub key: Uuid,
    /// Its id, `{uuid}.{node}`.
    pub id: String,
    pub open: bool,
    pub hidden: bool,
    pub max_size: usize,
    pub label: String,
}

/// A refusal as it travels back from the party's node.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Refused {
    Party(PartyError),
    NotFound,
    Other(String),
}

/// The owner's answer to a [`Request`].
#[derive(Debug, Serialize, Deserialize)]
struct OwnerAnswer(Result<Reply, Refused>);

impl crate::cluster::protocol::Message for OwnerAnswer {
    const KIND: &'static str = "parties.answer";
}

impl From<PartiesError> for Refused {
    fn from(error: PartiesError) -> Refused {
        match error {
            PartiesError::Party(e) => Refused::Party(e),
            PartiesError::NotFound => Refused::NotFound,
            other => Refused::Other(other.to_string()),
        }
    }
}

impl From<Refused> for PartiesError {
    fn from(refused: Refused) -> PartiesError {
        match refused {
            Refused::Party(e) => PartiesError::Party(e),
            Refused::NotFound => PartiesError::NotFound,
            Refused::Other(message) => PartiesError::Matchmaker(message),
        }
    }
}

fn presence(presence: Option<UserPresence>) -> Result<UserPresence, PartiesError> {
    presence.ok_or_else(|| PartiesError::Invalid("A presence must be given.".into()))
}

fn check_label(label: &str) -> Result<(), PartiesError> {
    if label.len() > MAX_LABEL_BYTES {
        return Err(PartiesError::Invalid(format!(
            "A party label is at most {MAX_LABEL_BYTES} bytes."
        )));
    }
    Ok(())
}

/// A session that ends leaves its parties (and withdraws its join requests).
impl SessionObserver for Parties {
    fn session_closed(&self, session: &Arc<Session>) {
        let Some((_, refs)) = self.mine.remove(&session.session_id) else {
            return;
        };
        let caller = self.caller(session);
        for party in refs {
            if party.owner == self.node {
                let _ = self.apply(party.id, caller.clone(), Op::Gone);
            } else if let Some(bus) = &self.bus {
                let request = Request {
                    party: party.id,
                    caller: caller.clone(),
                    op: Op::Gone,
                };
                bus.send_soon(&requests_topic(&party.owner), &request);
            }
        }
    }
}

/// A node that dies takes its sessions out of this node's parties, and its parties away from
/// this node's sessions.
impl MembershipObserver for Parties {
    fn node_left(&self, node: &str, _why: Departure) {
        let ids: Vec<Uuid> = self.owned.iter().map(|p| *p.key()).collect();
        for id in ids {
            let Some(party) = self.owned.get(&id).map(|p| p.value().clone()) else {
                continue;
            };
            let mut outcome = Outcome::default();
            party.lock().drop_node(node, &mut outcome);
            if outcome.closed {
                self.owned.remove(&id);
            }
            self.carry_out(id, outcome);
        }
        let mut closed = Vec::new();
        for mut entry in self.mine.iter_mut() {
            let session = *entry.key();
            entry.value_mut().retain(|party| {
                let gone = party.owner == node;
                if gone {
                    closed.push((session, party.party_id()));
                }
                !gone
            });
        }
        self.mine.retain(|_, refs| !refs.is_empty());
        for (session, party_id) in closed {
            let close = Encoded::new(Envelope::new(
                String::new(),
                Message::PartyClose(PartyClose { party_id }),
            ));
            self.router.send_to_session(session, &close);
        }
    }
}
