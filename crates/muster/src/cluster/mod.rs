//! The seam between domains and sessions: domains reach any session other than the one whose
//! request they are answering only through here, so that going from one node to many is a new
//! [`Router`] implementation, not an edit of every domain.
//!
//! - [`Router`]: deliver to a session, a user or a chat channel's members wherever they are;
//!   channel membership and presence (who is online).
//! - [`Recipient`]: a session as a domain holds it (a match member, a matchmaker ticket's
//!   owner): something to deliver to and to name, never the session's own state.
//! - [`local::LocalRouter`]: the one-node implementation over the session registry and the
//!   node's channel registry. The NATS implementation (several nodes) comes with the cluster.
//! - [`bus`]: the node's NATS connection and subjects; [`membership`]: which nodes of a cluster
//!   are alive (heartbeats, a failure timeout, observers told of nodes joining and leaving);
//!   [`shared::ClusterRouter`]: the local router plus channels shared with the other nodes. All
//!   only with `cluster.nats_url`.

pub mod bus;
pub mod config;
pub mod local;
pub mod membership;
pub mod protocol;
pub mod shared;

use std::sync::Arc;

use muster_proto::realtime::UserPresence;
use uuid::Uuid;

use crate::session::channels::{Channel, ChannelRefusal, JoinFlags, Joined};
use crate::session::fanout::Encoded;
use crate::session::Session;

pub use local::LocalRouter;

/// This node's part in a cluster: its bus and its router.
#[derive(Clone)]
pub struct Cluster {
    pub bus: bus::Bus,
    pub router: Arc<shared::ClusterRouter>,
}

/// How many recipients took a fanned-out message, and how many could not (their outbox was
/// full: those sessions are being closed).
pub use crate::session::channels::Delivery;

/// Limits a channel join is held to.
#[derive(Debug, Clone, Copy)]
pub struct JoinLimits {
    /// Most channels one session may be in.
    pub max_channels: usize,
    /// Most presences listed in the join's answer.
    pub max_listed: usize,
}

/// Delivery and presence across however many nodes there are.
pub trait Router: Send + Sync {
    /// Queues `message` for the session `session_id`; false when it is not connected (or its
    /// outbox overflowed and it is being closed).
    fn send_to_session(&self, session_id: Uuid, message: &Encoded) -> bool;

    /// Queues `message` for every session of `user_id`; how many took it.
    fn send_to_user(&self, user_id: Uuid, message: &Encoded) -> usize;

    /// Whether `user_id` has at least one session open.
    fn is_online(&self, user_id: Uuid) -> bool;

    /// Puts `session` in channel `channel_id`, tells the other members (unless hidden) and
    /// lists who is there; joining a channel the session is in already changes nothing.
    fn join_channel(
        &self,
        session: &Arc<Session>,
        channel_id: &str,
        flags: JoinFlags,
        limits: JoinLimits,
    ) -> Result<Joined, ChannelRefusal>;

    /// Takes `session` out of channel `channel_id`, telling the others.
    fn leave_channel(&self, session: &Arc<Session>, channel_id: &str)
        -> Result<(), ChannelRefusal>;

    /// Queues `message` for every member of `channel`, the sender's session included.
    fn send_to_channel(&self, channel: &Channel, message: &Encoded) -> Delivery;

    /// Queues `message` for every member of the channel called `channel_id`, wherever they
    /// are (server code sending into a channel it is not a member of).
    fn send_to_channel_id(&self, channel_id: &str, message: &Encoded) -> Delivery;

    /// Members of channel `channel_id` now.
    fn channel_members(&self, channel_id: &str) -> usize;
}

/// A session as a domain holds it: a name (its ids and presence) and a way to deliver to it.
/// Cheap to clone. A session on this node is held directly; a session on another node (a
/// member of a match that lives here) by its ids and its node, reached over the bus.
#[derive(Clone)]
pub struct Recipient {
    at: At,
}

#[derive(Clone)]
enum At {
    Here(Arc<Session>),
    Elsewhere(Arc<Remote>),
}

/// A session on another node.
struct Remote {
    session_id: Uuid,
    user_id: Uuid,
    presence: UserPresence,
    node: String,
    bus: bus::Bus,
}

impl Recipient {
    /// The session a request came from, on this node.
    pub fn local(session: &Arc<Session>) -> Recipient {
        Recipient {
            at: At::Here(session.clone()),
        }
    }

    /// A session of node `node`, reached through `bus`.
    pub fn remote(
        presence: UserPresence,
        user_id: Uuid,
        node: &str,
        bus: &bus::Bus,
    ) -> Option<Recipient> {
        let session_id = Uuid::try_parse(&presence.session_id).ok()?;
        Some(Recipient {
            at: At::Elsewhere(Arc::new(Remote {
                session_id,
                user_id,
                presence,
                node: node.to_string(),
                bus: bus.clone(),
            })),
        })
    }

    pub fn session_id(&self) -> Uuid {
        match &self.at {
            At::Here(session) => session.session_id,
            At::Elsewhere(remote) => remote.session_id,
        }
    }

    pub fn user_id(&self) -> Uuid {
        match &self.at {
            At::Here(session) => session.user_id,
            At::Elsewhere(remote) => remote.user_id,
        }
    }

    /// The node the session is on; `None` for this node.
    pub fn node(&self) -> Option<&str> {
        match &self.at {
            At::Here(_) => None,
            At::Elsewhere(remote) => Some(&remote.node),
        }
    }

    /// The session as channel and match members see it.
    pub fn presence(&self) -> UserPresence {
        match &self.at {
            At::Here(session) => session.presence(),
            At::Elsewhere(remote) => remote.presence.clone(),
        }
    }

    /// Closes the session's socket (Nakama disconnects the players of a match whose handler
    /// failed).
    pub fn disconnect(&self) {
        match &self.at {
            At::Here(session) => session.outbox.kick(),
            At::Elsewhere(remote) => {
                shared::end_session_on(&remote.bus, &remote.node, remote.session_id);
            }
        }
    }

    /// Queues `message` for this session; false when it cannot take it (it is being closed).
    /// For a session on another node: true once the message is on its way there.
    pub fn deliver(&self, message: &Encoded) -> bool {
        match &self.at {
            At::Here(session) => message.deliver(session),
            At::Elsewhere(remote) => {
                shared::send_to_session_on(&remote.bus, &remote.node, remote.session_id, message);
                true
            }
        }
    }
}
