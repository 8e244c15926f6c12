//! Matches across the nodes of a cluster. A match lives on the node that made it (its id says
//! which: [`super::id::node_tag`]); a session on another node that joins it becomes a member
//! there whose messages go back over the bus, and its node keeps a [`MatchRef::Remote`]
//! membership that routes the session's data and leave to the owner.
//!
//! Over NATS (subjects under the cluster's prefix), in the cluster's protocol
//! ([`crate::cluster::protocol`]):
//! - `node.<owner>.match.join`, request/reply: a [`JoinAsk`], answered with the match (the
//!   protobuf `Match`) or the refusal (the error's label and message);
//! - `node.<node>.match.in`, ordered publishes of [`Inbound`]: data from a member (its session
//!   and the protobuf `MatchDataSend`), a member that left, a match that ended (sent by the
//!   owner to each member's node). Joiner and owner each publish from one ordered queue, so a
//!   member's data never overtakes its join's answer or its leave.
//!
//! - `node.<owner>.room`, request/reply: a [`RoomAsk`], the rooms API for a room of another
//!   node — its info, a player's connection info (the ticket issued by the owner, the owner's
//!   address), or its destruction — the node's part of a match listing, and an operator's look
//!   at, signal to or kick from a match of the node (the console).
//!
//! Nodes that leave the cluster take their part with them: the owner drops the members of a node
//! that died (the others are told they left), and a node drops its sessions' memberships of the
//! matches of an owner that died (a later `match_data_send` is answered "not a member").

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use muster_proto::realtime::{Match, MatchDataSend, UserPresence};
use parking_lot::Mutex;
use prost::Message as _;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::MatchError;
use super::handler::Input;
use super::id::{node_tag, MatchId};
use super::member::Member;
use super::registry::MatchRef;
use super::Matches;
use crate::cluster::bus::Bus;
use crate::cluster::protocol::{decode, Message};
use crate::cluster::Recipient;

fn join_topic(node: &str) -> String {
    format!("node.{node}.match.join")
}

fn in_topic(node: &str) -> String {
    format!("node.{node}.match.in")
}

fn room_topic(node: &str) -> String {
    format!("node.{node}.room")
}

/// How long a rooms API call waits for the room's node.
const ROOM_TIMEOUT: Duration = Duration::from_secs(5);

/// Who is calling the rooms API (`crate::rooms`), as a call for another node's room names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoomCaller {
    /// A player, by session token.
    Player { user_id: Uuid, username: String },
    /// A game server, by `rooms.admin_key`.
    Admin,
}

/// What answers another node's rooms calls (`Info`, `Connection`, `Destroy`) for rooms of this
/// node: the rooms service, which stands on matches and tells them so once it exists.
#[async_trait::async_trait]
pub trait RoomAnswers: Send + Sync {
    async fn answer(&self, ask: RoomAsk) -> Result<serde_json::Value, MatchError>;
}

/// A rooms API call for a room of another node.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RoomAsk {
    Info {
        id: String,
    },
    Connection {
        id: String,
        caller: RoomCaller,
        /// The host the player called, used only when the owner has no address of its own.
        request_host: String,
    },
    Destroy {
        id: String,
        caller: RoomCaller,
    },
    /// `GET /v2/match` asked on another node: this node's matches that pass it.
    ListMatches(super::listing::ListAsk),
    /// An operator's look at a match here (its presences and state).
    Inspect {
        id: String,
    },
    /// An operator's signal to an authoritative match here.
    Signal {
        id: String,
        data: String,
    },
    /// An operator removing a player from a match here.
    Kick {
        id: String,
        session: Uuid,
    },
}

impl Message for RoomAsk {
    const KIND: &'static str = "matches.room_ask";
}

/// The owner's answer to a [`RoomAsk`]: the API's answer, or the error's label and message.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum RoomAnswer {
    Ok(serde_json::Value),
    Err { label: String, message: String },
}

impl Message for RoomAnswer {
    const KIND: &'static str = "matches.room_answer";
}

/// A session's place in a match: (session, match).
type Seat = (Uuid, MatchId);

/// Sessions of one other node in matches here, and the matches.
type Guests = HashMap<Seat, MatchRef>;

/// A join asked of the match's owner.
#[derive(Debug, Serialize, Deserialize)]
struct JoinAsk {
    id: Uuid,
    authoritative: bool,
    /// Make the (relayed) match if it does not exist yet: a matchmaker token names a relayed
    /// match before anyone is in it.
    create: bool,
    presence: UserPresence,
    user_id: Uuid,
    /// The joining session's node.
    node: String,
    metadata: HashMap<String, String>,
}

impl Message for JoinAsk {
    const KIND: &'static str = "matches.join";
}

/// The owner's answer to a [`JoinAsk`]: the match joined (the protobuf `Match`), or why not.
#[derive(Debug, Serialize, Deserialize)]
enum JoinAnswer {
    Joined(serde_bytes::ByteBuf),
    Refused { label: String, message: String },
}

impl Message for JoinAnswer {
    const KIND: &'static str = "matches.join_answer";
}

impl JoinAnswer {
    fn of(result: &Result<Match, MatchError>) -> JoinAnswer {
        match result {
            Ok(reply) => JoinAnswer::Joined(serde_bytes::ByteBuf::from(reply.encode_to_vec())),
            Err(error) => JoinAnswer::Refused {
                label: error.label().to_owned(),
                message: error.to_string(),
            },
        }
    }

    fn into_result(self) -> Result<Match, MatchError> {
        match self {
            JoinAnswer::Joined(body) => Match::decode(body.as_slice()).map_err(|_| {
                MatchError::Rejected("The match's node gave an unreadable answer.".into())
            }),
            JoinAnswer::Refused { label, message } => Err(error_of(&label, message)),
        }
    }
}

/// What a node tells a match's owner, or the owner a member's node, on its inbox.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Inbound {
    /// A member's `match_data_send` (the protobuf message).
    Data {
        from: Uuid,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
    /// A member left the match.
    Leave {
        session: Uuid,
        id: Uuid,
        authoritative: bool,
    },
    /// The match ended (its member's node forgets the membership).
    Ended {
        session: Uuid,
        id: Uuid,
        authoritative: bool,
    },
}

impl Message for Inbound {
    const KIND: &'static str = "matches.inbound";
}

fn left(session: Uuid, id: MatchId) -> Inbound {
    Inbound::Leave {
        session,
        id: id.uuid,
        authoritative: id.authoritative,
    }
}

/// This node's link to the matches of the others.
pub struct MatchLink {
    bus: Bus,
    /// This node's tag in match ids.
    my_tag: [u8; 6],
    /// Live peers by the tag their match ids carry.
    peers: Mutex<HashMap<[u8; 6], String>>,
    /// Sessions here in matches of other nodes: owner → (session, match).
    joined: Mutex<HashMap<String, HashSet<Seat>>>,
    /// Sessions of other nodes in matches here: their node → (session, match) → the match.
    hosted: Mutex<HashMap<String, Guests>>,
    subscriptions: Mutex<Option<Subscriptions>>,
}

struct Subscriptions {
    joins: async_nats::Subscriber,
    inbox: async_nats::Subscriber,
    rooms: async_nats::Subscriber,
}

impl MatchLink {
    /// Subscribes to this node's match subjects; [`serve`] answers them.
    pub async fn open(bus: Bus) -> anyhow::Result<MatchLink> {
        let joins = bus.subscribe(&join_topic(bus.node())).await?;
        let inbox = bus.subscribe(&in_topic(bus.node())).await?;
        let rooms = bus.subscribe(&room_topic(bus.node())).await?;
        Ok(MatchLink {
            my_tag: node_tag(bus.node()),
            bus,
            peers: Mutex::new(HashMap::new()),
            joined: Mutex::new(HashMap::new()),
            hosted: Mutex::new(HashMap::new()),
            subscriptions: Mutex::new(Some(Subscriptions {
                joins,
                inbox,
                rooms,
            })),
        })
    }

    /// The live node match `id` lives on, when that is another node than this one. A match
    /// whose node is not (or no longer) in the cluster is looked for here.
    pub fn owner_of(&self, id: MatchId) -> Option<String> {
        let tag = id.tag();
        if tag == self.my_tag {
            return None;
        }
        self.peers.lock().get(&tag).cloned()
    }

    /// Asks `owner` to take `session` into match `id`; waits at most `limit` (plus the trip).
    pub async fn join(
        &self,
        owner: &str,
        member: &Member,
        id: MatchId,
        create: bool,
        metadata: HashMap<String, String>,
        limit: Duration,
    ) -> Result<Match, MatchError> {
        let session = member.recipient.session_id();
        let ask = JoinAsk {
            id: id.uuid,
            authoritative: id.authoritative,
            create,
            presence: member.presence.clone(),
            user_id: member.recipient.user_id(),
            node: self.bus.node().to_string(),
            metadata,
        };
        let answer = self
            .bus
            .ask::<_, JoinAnswer>(&join_topic(owner), &ask, limit + Duration::from_secs(1))
            .await;
        let result = match answer {
            Ok(answer) => answer.into_result(),
            Err(error) => {
                tracing::debug!(owner, "cluster: match join unanswered: {error}");
                // The owner may have taken the member after all: undo it.
                self.bus.send_soon(&in_topic(owner), &left(session, id));
                Err(MatchError::Rejected(
                    "The match's node did not answer in time; try again.".into(),
                ))
            }
        };
        if result.is_ok() {
            self.joined
                .lock()
                .entry(owner.to_string())
                .or_default()
                .insert((session, id));
        }
        result
    }

    /// Asks `owner` the rooms API call `ask` about one of its rooms; its answer.
    pub async fn room(&self, owner: &str, ask: &RoomAsk) -> Result<serde_json::Value, MatchError> {
        let answer = self
            .bus
            .ask::<_, RoomAnswer>(&room_topic(owner), ask, ROOM_TIMEOUT)
            .await
            .map_err(|_| {
                MatchError::Rejected("The room's node did not answer in time; try again.".into())
            })?;
        match answer {
            RoomAnswer::Ok(value) => Ok(value),
            RoomAnswer::Err { label, message } => Err(error_of(&label, message)),
        }
    }

    /// Forwards a member's `match_data_send` to the match's owner.
    pub fn send(&self, owner: &str, from: Uuid, data: &MatchDataSend) {
        let message = Inbound::Data {
            from,
            data: data.encode_to_vec(),
        };
        self.bus.send_soon(&in_topic(owner), &message);
    }

    /// Tells the match's owner that `session` left it.
    pub fn leave(&self, owner: &str, session: Uuid, id: MatchId) {
        if let Some(set) = self.joined.lock().get_mut(owner) {
            set.remove(&(session, id));
        }
        self.bus.send_soon(&in_topic(owner), &left(session, id));
    }

    /// The other live nodes.
    pub fn peers(&self) -> Vec<String> {
        self.peers.lock().values().cloned().collect()
    }

    pub fn node_joined(&self, node: &str) {
        self.peers.lock().insert(node_tag(node), node.to_string());
    }

    /// Forgets `node`: returns what its death ends here — the members it had in matches here,
    /// and this node's memberships of matches it owned.
    pub fn node_left(&self, node: &str) -> (Guests, HashSet<Seat>) {
        self.peers.lock().remove(&node_tag(node));
        let hosted = self.hosted.lock().remove(node).unwrap_or_default();
        let joined = self.joined.lock().remove(node).unwrap_or_default();
        (hosted, joined)
    }
}

/// The error of label `label` (see [`MatchError::label`]).
fn error_of(label: &str, message: String) -> MatchError {
    match label {
        "not_found" => MatchError::NotFound(message),
        "ended" => MatchError::Ended(message),
        "forbidden" => MatchError::Forbidden(message),
        "bad_input" => MatchError::BadInput(message),
        _ => MatchError::Rejected(message),
    }
}

/// Answers the other nodes' joins and applies their members' data and leaves, until shutdown.
pub fn serve(matches: Arc<Matches>) {
    let Some(link) = matches.link.as_ref() else {
        return;
    };
    let Some(Subscriptions {
        mut joins,
        mut inbox,
        mut rooms,
    }) = link.subscriptions.lock().take()
    else {
        return;
    };
    let serving = matches.clone();
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                () = serving.shutdown.cancelled() => return,
                message = rooms.next() => match message {
                    Some(message) => message,
                    None => return,
                },
            };
            let Some(reply) = message.reply else { continue };
            let answer = match decode::<RoomAsk>(&message.payload) {
                Ok(ask) => match serving.answer_room(ask).await {
                    Ok(value) => RoomAnswer::Ok(value),
                    Err(error) => RoomAnswer::Err {
                        label: error.label().to_string(),
                        message: error.to_string(),
                    },
                },
                Err(_) => RoomAnswer::Err {
                    label: "bad_input".into(),
                    message: "Unreadable rooms call.".into(),
                },
            };
            if let Some(link) = serving.link.as_ref() {
                link.bus.answer(reply, &answer).await;
            }
        }
    });
    let serving = matches.clone();
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                () = serving.shutdown.cancelled() => return,
                message = joins.next() => match message {
                    Some(message) => message,
                    None => return,
                },
            };
            let Some(reply) = message.reply else { continue };
            let matches = serving.clone();
            // Each join waits for its match's answer: concurrently, so one busy match does not
            // hold up joins of the others.
            tokio::spawn(async move {
                let result = match decode::<JoinAsk>(&message.payload) {
                    Ok(ask) => host_join(&matches, ask).await,
                    Err(_) => Err(MatchError::BadInput("Unreadable join.".into())),
                };
                if let Some(link) = matches.link.as_ref() {
                    link.bus.answer(reply, &JoinAnswer::of(&result)).await;
                }
            });
        }
    });
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                () = matches.shutdown.cancelled() => return,
                message = inbox.next() => match message {
                    Some(message) => message,
                    None => return,
                },
            };
            received(&matches, &message.payload);
        }
    });
}

/// A join of a session of another node, into a match here.
async fn host_join(matches: &Matches, ask: JoinAsk) -> Result<Match, MatchError> {
    let link = matches
        .link
        .as_ref()
        .ok_or_else(|| MatchError::NotFound("This node is not part of a cluster.".into()))?;
    let recipient = Recipient::remote(ask.presence.clone(), ask.user_id, &ask.node, &link.bus)
        .ok_or_else(|| MatchError::BadInput("Unreadable session id.".into()))?;
    let session = recipient.session_id();
    let member = Member {
        presence: ask.presence,
        recipient,
    };
    let id = MatchId {
        uuid: ask.id,
        authoritative: ask.authoritative,
    };
    let target = if ask.create && !id.authoritative {
        matches
            .registry
            .relayed_or_insert(id, matches.config.max_matches, || {
                matches.new_relayed(id, None)
            })
            .map(MatchRef::Relayed)?
    } else {
        matches.registry.get(id)?
    };
    let reply = matches.admit(member, &target, ask.metadata).await?;
    link.hosted
        .lock()
        .entry(ask.node.clone())
        .or_default()
        .insert((session, id), target.clone());
    if let MatchRef::Authoritative(handle) = target {
        // When the match ends, the member's node forgets the membership.
        let bus = link.bus.clone();
        let node = ask.node;
        let matches_link = matches.link.clone();
        tokio::spawn(async move {
            handle.ended.cancelled().await;
            let still_member = matches_link.is_some_and(|link| {
                link.hosted
                    .lock()
                    .get_mut(&node)
                    .is_some_and(|members| members.remove(&(session, id)).is_some())
            });
            if still_member {
                let ended = Inbound::Ended {
                    session,
                    id: id.uuid,
                    authoritative: id.authoritative,
                };
                bus.send_soon(&in_topic(&node), &ended);
            }
        });
    }
    Ok(reply)
}

/// Data, a leave or an ending from another node.
fn received(matches: &Matches, payload: &[u8]) {
    let Some(link) = matches.link.as_ref() else {
        return;
    };
    let message = match decode::<Inbound>(payload) {
        Ok(message) => message,
        Err(error) => {
            tracing::debug!("cluster: unreadable match message: {error}");
            return;
        }
    };
    match message {
        Inbound::Data { from, data } => {
            let Ok(data) = MatchDataSend::decode(data.as_slice()) else {
                tracing::debug!("cluster: unreadable match data");
                return;
            };
            if data.data.len() > matches.config.max_data_bytes {
                return;
            }
            let Ok((id, _)) = MatchId::parse_any(&data.match_id) else {
                return;
            };
            match matches.registry.get(id) {
                Ok(MatchRef::Relayed(relayed)) => {
                    relayed.send(
                        from,
                        data.op_code,
                        data.data,
                        &data.presences,
                        data.reliable,
                    );
                }
                Ok(MatchRef::Authoritative(handle)) => {
                    let input = Input {
                        from,
                        op_code: data.op_code,
                        data: data.data,
                        reliable: data.reliable,
                    };
                    if handle.input(input).is_err() {
                        matches
                            .metrics
                            .inputs_dropped
                            .with_label_values(&["queue_full"])
                            .inc();
                    }
                }
                _ => {}
            }
        }
        Inbound::Leave {
            session,
            id,
            authoritative,
        } => {
            let id = MatchId {
                uuid: id,
                authoritative,
            };
            let target = link
                .hosted
                .lock()
                .values_mut()
                .find_map(|members| members.remove(&(session, id)));
            if let Some(target) = target {
                matches.leave_target(session, target);
            }
        }
        Inbound::Ended {
            session,
            id,
            authoritative,
        } => {
            let id = MatchId {
                uuid: id,
                authoritative,
            };
            matches.registry.remove_membership(session, id);
            for set in link.joined.lock().values_mut() {
                set.remove(&(session, id));
            }
        }
    }
}

/// A node's answer to a [`RoomAsk`], read as `T`.
pub(crate) fn from_answer<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> Result<T, MatchError> {
    serde_json::from_value(value)
        .map_err(|_| MatchError::Rejected("The room's node gave an unreadable answer.".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::protocol::encode;

    #[test]
    fn answers_and_memberships_survive_the_trip() {
        let trip = |result: &Result<Match, MatchError>| {
            decode::<JoinAnswer>(&encode(&JoinAnswer::of(result)))
                .expect("read")
                .into_result()
        };
        let reply = Match {
            match_id: "x.".into(),
            size: 2,
            ..Default::default()
        };
        assert_eq!(trip(&Ok(reply.clone())), Ok(reply));
        for error in [
            MatchError::NotFound("gone".into()),
            MatchError::Ended("over".into()),
            MatchError::Rejected("full".into()),
            MatchError::BadInput("bad".into()),
        ] {
            assert_eq!(trip(&Err(error.clone())), Err(error));
        }
        let garbage = JoinAnswer::Joined(serde_bytes::ByteBuf::from(vec![0xff, 0xff]));
        assert!(matches!(
            garbage.into_result(),
            Err(MatchError::Rejected(_))
        ));
        let id = MatchId::new_authoritative("n");
        let session = Uuid::new_v4();
        match decode::<Inbound>(&encode(&left(session, id))) {
            Ok(Inbound::Leave {
                session: s,
                id: i,
                authoritative,
            }) => assert_eq!((s, i, authoritative), (session, id.uuid, true)),
            other => panic!("{other:?}"),
        }
        assert!(decode::<Inbound>(&[0x93, 1, 2]).is_err());
    }
}
