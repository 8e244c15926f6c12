//! The router of a single node: every session is in this process's registry, every channel
//! member in this node's channel registry.

use std::sync::Arc;

use uuid::Uuid;

use super::{JoinLimits, Router};
use crate::session::channels::{
    Channel, ChannelRefusal, ChannelRegistry, Delivery, JoinFlags, Joined,
};
use crate::session::fanout::Encoded;
use crate::session::registry::SessionObserver;
use crate::session::{Session, SessionRegistry};

pub struct LocalRouter {
    sessions: Arc<SessionRegistry>,
    channels: ChannelRegistry,
}

impl LocalRouter {
    pub fn new(sessions: Arc<SessionRegistry>, channels: ChannelRegistry) -> LocalRouter {
        LocalRouter { sessions, channels }
    }

    /// This node's channel members (the cluster router shares them with other nodes).
    pub fn channels(&self) -> &ChannelRegistry {
        &self.channels
    }

    /// This node's sessions.
    pub fn sessions(&self) -> &SessionRegistry {
        &self.sessions
    }
}

impl Router for LocalRouter {
    fn send_to_session(&self, session_id: Uuid, message: &Encoded) -> bool {
        self.sessions
            .session(session_id)
            .is_some_and(|session| message.deliver(&session))
    }

    fn send_to_user(&self, user_id: Uuid, message: &Encoded) -> usize {
        self.sessions
            .sessions_of(user_id)
            .iter()
            .filter(|session| message.deliver(session))
            .count()
    }

    fn is_online(&self, user_id: Uuid) -> bool {
        self.sessions.is_online(user_id)
    }

    fn join_channel(
        &self,
        session: &Arc<Session>,
        channel_id: &str,
        flags: JoinFlags,
        limits: JoinLimits,
    ) -> Result<Joined, ChannelRefusal> {
        self.channels.join(
            session,
            channel_id,
            flags,
            limits.max_channels,
            limits.max_listed,
        )
    }

    fn leave_channel(
        &self,
        session: &Arc<Session>,
        channel_id: &str,
    ) -> Result<(), ChannelRefusal> {
        self.channels.leave(session, channel_id)
    }

    fn send_to_channel(&self, channel: &Channel, message: &Encoded) -> Delivery {
        self.channels.broadcast(channel, message)
    }

    fn send_to_channel_id(&self, channel_id: &str, message: &Encoded) -> Delivery {
        self.channels
            .get(channel_id)
            .map(|channel| self.channels.broadcast(&channel, message))
            .unwrap_or_default()
    }

    fn channel_members(&self, channel_id: &str) -> usize {
        self.channels.member_count(channel_id)
    }
}

/// A session that ends leaves every channel it is in, with leave events to the others.
impl SessionObserver for LocalRouter {
    fn session_closed(&self, session: &Arc<Session>) {
        self.channels.leave_all(session);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::base::metrics::Metrics;
    use crate::session::channels::PresenceEvents;
    use crate::session::Format;
    use muster_proto::realtime::{Envelope, Message, Pong, UserPresence};

    /// Presence events as pongs: the router's tests only count deliveries (the cluster's too).
    pub(in crate::cluster) struct Quiet;

    impl PresenceEvents for Quiet {
        fn joined(&self, channel_id: &str, _: UserPresence) -> Encoded {
            Encoded::new(Envelope::new(channel_id, Message::Pong(Pong {})))
        }
        fn left(&self, channel_id: &str, who: UserPresence) -> Encoded {
            self.joined(channel_id, who)
        }
    }

    fn pong() -> Encoded {
        Encoded::new(Envelope::new("", Message::Pong(Pong {})))
    }

    #[test]
    fn delivers_to_sessions_users_and_channels_and_forgets_closed_sessions() {
        let metrics = Arc::new(Metrics::new());
        let sessions = Arc::new(SessionRegistry::new(metrics.clone()));
        let router = Arc::new(LocalRouter::new(
            sessions.clone(),
            ChannelRegistry::new(Arc::new(Quiet), metrics),
        ));
        sessions.on_session_closed(router.clone());
        let (alice, bob) = (Uuid::new_v4(), Uuid::new_v4());
        let open = |user, name| {
            let place = sessions.admit(0).expect("no limit");
            sessions.register(place, user, name, Format::Json, 8)
        };
        let (a1, a2, b) = (open(alice, "alice"), open(alice, "alice"), open(bob, "bob"));

        assert!(router.send_to_session(b.entry.session_id, &pong()));
        assert!(!router.send_to_session(Uuid::new_v4(), &pong()));
        assert_eq!(router.send_to_user(alice, &pong()), 2);
        assert_eq!(router.send_to_user(Uuid::new_v4(), &pong()), 0);
        assert!(router.is_online(bob));

        let flags = JoinFlags {
            persistence: false,
            hidden: false,
            ..JoinFlags::default()
        };
        let limits = JoinLimits {
            max_channels: 4,
            max_listed: 10,
        };
        for guard in [&a1, &b] {
            router
                .join_channel(&guard.entry, "2...lobby", flags, limits)
                .expect("join");
        }
        assert_eq!(router.channel_members("2...lobby"), 2);
        drop(b);
        assert_eq!(
            router.channel_members("2...lobby"),
            1,
            "a closed session leaves"
        );
        assert!(!router.is_online(bob));
        drop((a1, a2));
        assert_eq!(router.channel_members("2...lobby"), 0);
        assert!(!router.is_online(alice));
    }
}
