//! Channel membership on this node: which sessions are in which channel, kept so that a join, a
//! leave and a session's end each cost O(1) whatever the channel's size, and so that 400,000
//! channels cost little more than their members.
//!
//! A channel here is only a set of sessions that receive the same messages; what its members
//! are told when someone joins or leaves is the caller's format ([`PresenceEvents`], the chat
//! domain's `channel_presence_event`), and who may join what is the chat domain's rules. The
//! cluster router reaches channels through this registry, and chat reaches them through the
//! router.
//!
//! ## Shape
//!
//! - The registry maps a channel id (Nakama's form, `2...room`) to an `Arc<Channel>`; a channel
//!   exists while it has members and is removed with its last one.
//! - A channel holds its members in a `Vec` (16 bytes each: the socket's `Arc` and two flags).
//!   A leave swap-removes: the last member moves into the hole.
//! - Each session's [`SessionChannels`] lists the channels it is in and
//!   its index in each member list. A leave reads the leaver's index there (O(1) find in a list
//!   of a few entries), and the member moved by the swap-remove gets its index rewritten. A
//!   disconnect walks only the channels that socket joined.
//!
//! ## Locks
//!
//! Order: **channel → session → outbox**, never the reverse, and never more than one session
//! lock at a time. A channel's lock is held while its member list changes and while a message is
//! fanned out to it (each delivery takes the recipient's outbox lock for a push); session locks
//! are taken inside it to read or rewrite indices. Code that starts from a session (a send, a
//! leave) copies what it needs out of the session lock and releases it before taking the
//! channel's. The registry's map (a `DashMap`) is only locked inside a channel lock when the last
//! member removes the channel; a join releases the map before locking the channel. No lock is
//! ever held across an `.await`.
//!
//! A join that finds a channel whose last member is leaving at that very moment sees it marked
//! closed under its lock and looks the id up again, so nobody is ever left in a channel the
//! registry forgot.

use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use muster_proto::realtime::UserPresence;
use parking_lot::Mutex;

mod per_session;

pub use per_session::{Admitted, JoinFlags, SessionChannels};

use crate::base::metrics::Metrics;
use crate::session::fanout::Encoded;
use crate::session::Session;

/// Why a channel operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelRefusal {
    /// The session is in `max` channels already.
    TooMany { max: usize },
    /// The session is not in the channel it named.
    NotJoined,
    /// The session's message budget is spent (`per_sec` messages a second).
    RateLimited { per_sec: u32 },
}

/// The events a channel's members are told of when someone joins or leaves (not for members
/// who joined hidden). The chat domain supplies them in its wire format.
pub trait PresenceEvents: Send + Sync {
    fn joined(&self, channel_id: &str, who: UserPresence) -> Encoded;
    fn left(&self, channel_id: &str, who: UserPresence) -> Encoded;

    /// The status message `session` shows where it joined as a status publisher
    /// ([`JoinFlags::publisher`]); none by default.
    fn status_of(&self, _session: &Session) -> Option<String> {
        None
    }
}

/// Every channel with at least one member on this node.
pub struct ChannelRegistry {
    channels: DashMap<Arc<str>, Arc<Channel>>,
    events: Arc<dyn PresenceEvents>,
    metrics: Arc<Metrics>,
}

/// One channel: its id and its members.
pub struct Channel {
    /// Nakama's channel id, shared with the registry's key.
    pub id: Arc<str>,
    members: Mutex<Members>,
}

struct Members {
    list: Vec<Member>,
    /// Set (under this lock) when the last member left and the channel left the registry.
    closed: bool,
}

struct Member {
    session: Arc<Session>,
    flags: JoinFlags,
}

impl Member {
    fn presence(&self, events: &dyn PresenceEvents) -> UserPresence {
        member_presence(&self.session, self.flags, events)
    }
}

/// A member's presence as the others see it: the session's, with the join's persistence and,
/// on the session's own status channel, its status message.
pub fn member_presence(
    session: &Session,
    flags: JoinFlags,
    events: &dyn PresenceEvents,
) -> UserPresence {
    let mut presence = session.presence();
    presence.persistence = flags.persistence;
    if flags.publisher {
        presence.status = Some(events.status_of(session).unwrap_or_default());
    }
    presence
}

/// What the joining socket is told.
pub struct Joined {
    pub channel: Arc<Channel>,
    /// Visible members other than the joiner, at most `max_listed` of them.
    pub presences: Vec<UserPresence>,
    pub flags: JoinFlags,
    /// False when the socket was already in the channel (the join changed nothing).
    pub new: bool,
}

/// How many recipients took a fanned-out message, and how many could not (their outbox was
/// full: those sockets are being closed).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    pub delivered: usize,
    pub dropped: usize,
}

impl ChannelRegistry {
    pub fn new(events: Arc<dyn PresenceEvents>, metrics: Arc<Metrics>) -> ChannelRegistry {
        ChannelRegistry {
            channels: DashMap::new(),
            events,
            metrics,
        }
    }

    /// Channels with members now.
    pub fn len(&self) -> usize {
        self.channels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }

    /// Puts `session` in channel `id` (creating the channel), tells the other members (unless
    /// `hidden`), and lists who is there. Joining a channel the socket is already in changes
    /// nothing and answers the same way.
    pub fn join(
        &self,
        session: &Arc<Session>,
        id: &str,
        flags: JoinFlags,
        max_channels: usize,
        max_listed: usize,
    ) -> Result<Joined, ChannelRefusal> {
        if let Some(already) = session.channels.find(id) {
            let members = already.channel.members.lock();
            let presences =
                visible_others(&members.list, session, max_listed, self.events.as_ref());
            drop(members);
            return Ok(Joined {
                channel: already.channel,
                presences,
                flags: already.flags,
                new: false,
            });
        }
        if session.channels.joined_count() >= max_channels {
            return Err(ChannelRefusal::TooMany { max: max_channels });
        }
        loop {
            let channel = match self.channels.entry(Arc::from(id)) {
                Entry::Occupied(entry) => entry.get().clone(),
                Entry::Vacant(entry) => {
                    let channel = Arc::new(Channel {
                        id: entry.key().clone(),
                        members: Mutex::new(Members {
                            list: Vec::new(),
                            closed: false,
                        }),
                    });
                    entry.insert(channel.clone());
                    self.metrics.chat_channels.inc();
                    channel
                }
            };
            let mut members = channel.members.lock();
            if members.closed {
                // Its last member left between our lookup and this lock; look again.
                continue;
            }
            let presences =
                visible_others(&members.list, session, max_listed, self.events.as_ref());
            let index = members.list.len() as u32;
            // Small channels grow one slot at a time (most game channels hold a handful of
            // members); large ones double as usual so a big room's joins stay amortised O(1).
            if members.list.len() == members.list.capacity() && members.list.len() < 8 {
                members.list.reserve_exact(1);
            }
            members.list.push(Member {
                session: session.clone(),
                flags,
            });
            session.channels.add(channel.clone(), index, flags);
            self.metrics.chat_members.inc();
            if !flags.hidden {
                let member = &members.list[index as usize];
                let event = self
                    .events
                    .joined(&channel.id, member.presence(self.events.as_ref()));
                let delivery = deliver(&members.list, &event, Some(session));
                self.count_presence(delivery);
            }
            drop(members);
            return Ok(Joined {
                channel,
                presences,
                flags,
                new: true,
            });
        }
    }

    /// Takes `session` out of channel `id`; an error when it was not in it.
    pub fn leave(&self, session: &Arc<Session>, id: &str) -> Result<(), ChannelRefusal> {
        let joined = session.channels.find(id).ok_or(ChannelRefusal::NotJoined)?;
        self.remove(session, &joined.channel);
        Ok(())
    }

    /// Takes `session` out of every channel it is in (its socket closed).
    pub fn leave_all(&self, session: &Arc<Session>) {
        for channel in session.channels.channels() {
            self.remove(session, &channel);
        }
    }

    /// The O(1) removal: swap-remove from the member list, fix the moved member's index, tell
    /// the others, drop the channel with its last member.
    fn remove(&self, session: &Arc<Session>, channel: &Arc<Channel>) {
        let mut members = channel.members.lock();
        let Some((index, flags)) = session.channels.remove(channel) else {
            return;
        };
        let index = index as usize;
        let in_place = members
            .list
            .get(index)
            .is_some_and(|m| Arc::ptr_eq(&m.session, session));
        if !in_place {
            // Cannot happen while every index change goes through this lock; refuse to remove
            // someone else if it ever did.
            tracing::error!(channel = %channel.id, "channel member index out of step; membership kept");
            return;
        }
        let leaver = members.list.swap_remove(index);
        if let Some(moved) = members.list.get(index) {
            moved.session.channels.moved(channel, index as u32);
        }
        self.metrics.chat_members.dec();
        if members.list.is_empty() {
            members.closed = true;
            members.list = Vec::new();
            self.channels
                .remove_if(&channel.id, |_, c| Arc::ptr_eq(c, channel));
            self.metrics.chat_channels.dec();
            return;
        }
        if members.list.capacity() > 16 && members.list.capacity() > 4 * members.list.len() {
            let keep = members.list.len() * 2;
            members.list.shrink_to(keep);
        }
        if !flags.hidden {
            let event = self
                .events
                .left(&channel.id, leaver.presence(self.events.as_ref()));
            let delivery = deliver(&members.list, &event, None);
            self.count_presence(delivery);
        }
    }

    /// Queues `message` on every member's socket, the sender's included (as Nakama does).
    pub fn broadcast(&self, channel: &Channel, message: &Encoded) -> Delivery {
        let members = channel.members.lock();
        let delivery = deliver(&members.list, message, None);
        drop(members);
        self.metrics
            .chat_messages_out
            .inc_by(delivery.delivered as u64);
        self.metrics
            .chat_deliveries_dropped
            .inc_by(delivery.dropped as u64);
        delivery
    }

    fn count_presence(&self, delivery: Delivery) {
        self.metrics
            .chat_presence_events_out
            .inc_by(delivery.delivered as u64);
        self.metrics
            .chat_deliveries_dropped
            .inc_by(delivery.dropped as u64);
    }

    /// Channel `id`, when it has members here.
    pub fn get(&self, id: &str) -> Option<Arc<Channel>> {
        self.channels.get(id).map(|c| c.value().clone())
    }

    /// The events members are told of joins and leaves in.
    pub fn events(&self) -> &dyn PresenceEvents {
        self.events.as_ref()
    }

    /// Every member of every channel here: (channel, presence, joined hidden). For another
    /// node's copy of this one's members (the cluster router).
    pub fn members_snapshot(&self) -> Vec<(Arc<str>, UserPresence, bool)> {
        let channels: Vec<Arc<Channel>> = self.channels.iter().map(|c| c.value().clone()).collect();
        let mut all = Vec::new();
        for channel in channels {
            let members = channel.members.lock();
            // Followers are this node's only: other nodes never deliver to them.
            for m in members.list.iter().filter(|m| !m.flags.follower) {
                all.push((
                    channel.id.clone(),
                    m.presence(self.events.as_ref()),
                    m.flags.hidden,
                ));
            }
        }
        all
    }

    /// Members of channel `id` now (0 when it does not exist).
    pub fn member_count(&self, id: &str) -> usize {
        self.channels
            .get(id)
            .map(|c| c.value().clone())
            .map_or(0, |c| c.members.lock().list.len())
    }
}

/// Delivers `message` to every member except `skip`.
fn deliver(list: &[Member], message: &Encoded, skip: Option<&Arc<Session>>) -> Delivery {
    let mut delivery = Delivery::default();
    for member in list {
        // A user's own sessions on their status channel are told nothing.
        if member.flags.publisher || skip.is_some_and(|s| Arc::ptr_eq(s, &member.session)) {
            continue;
        }
        if message.deliver(&member.session) {
            delivery.delivered += 1;
        } else {
            delivery.dropped += 1;
        }
    }
    delivery
}

fn visible_others(
    list: &[Member],
    me: &Arc<Session>,
    max: usize,
    events: &dyn PresenceEvents,
) -> Vec<UserPresence> {
    list.iter()
        .filter(|m| !m.flags.hidden && !Arc::ptr_eq(&m.session, me))
        .take(max)
        .map(|m| m.presence(events))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::registry::SessionRegistry;
    use crate::session::Format;
    use uuid::Uuid;

    const OPEN: JoinFlags = JoinFlags {
        persistence: false,
        hidden: false,
        follower: false,
        publisher: false,
    };

    /// Events that name what happened, for the tests to count.
    struct Events;

    impl PresenceEvents for Events {
        fn joined(&self, channel_id: &str, _: UserPresence) -> Encoded {
            let message = muster_proto::realtime::Message::Pong(Default::default());
            Encoded::new(muster_proto::realtime::Envelope::new(channel_id, message))
        }
        fn left(&self, channel_id: &str, who: UserPresence) -> Encoded {
            self.joined(channel_id, who)
        }
    }

    fn registry(metrics: Arc<Metrics>) -> ChannelRegistry {
        ChannelRegistry::new(Arc::new(Events), metrics)
    }

    fn sessions(n: usize) -> (Arc<Metrics>, Vec<crate::session::registry::SessionGuard>) {
        let metrics = Arc::new(Metrics::new());
        let registry = Arc::new(SessionRegistry::new(metrics.clone()));
        let guards = (0..n)
            .map(|i| {
                registry.register(
                    registry.admit(0).expect("no limit"),
                    Uuid::new_v4(),
                    &format!("u{i}"),
                    Format::Json,
                    64,
                )
            })
            .collect();
        (metrics, guards)
    }

    /// Every member's recorded index points at itself.
    fn check_indices(registry: &ChannelRegistry) {
        for entry in registry.channels.iter() {
            let channel = entry.value();
            let members = channel.members.lock();
            for (i, m) in members.list.iter().enumerate() {
                assert_eq!(m.session.channels.index_in(channel), Some(i as u32));
            }
        }
    }

    #[test]
    fn join_leave_and_disconnect_keep_indices_and_counts() {
        let (metrics, guards) = sessions(6);
        let registry = registry(metrics.clone());
        let s: Vec<_> = guards.iter().map(|g| g.entry.clone()).collect();
        for session in &s {
            registry
                .join(session, "2...a", OPEN, 8, 100)
                .expect("join a");
        }
        for session in &s[..3] {
            registry
                .join(session, "2...b", OPEN, 8, 100)
                .expect("join b");
        }
        assert_eq!((registry.len(), metrics.chat_members.get()), (2, 9));
        check_indices(&registry);
        // Leaving from the middle moves the last member into the hole.
        registry.leave(&s[1], "2...a").expect("leave");
        check_indices(&registry);
        assert_eq!(registry.member_count("2...a"), 5);
        assert!(matches!(
            registry.leave(&s[1], "2...a"),
            Err(ChannelRefusal::NotJoined)
        ));
        registry.leave_all(&s[0]);
        check_indices(&registry);
        assert_eq!(
            (
                registry.member_count("2...a"),
                registry.member_count("2...b")
            ),
            (4, 2)
        );
        for session in &s {
            registry.leave_all(session);
        }
        assert!(registry.is_empty(), "empty channels are removed");
        assert_eq!(metrics.chat_channels.get(), 0);
        assert_eq!(metrics.chat_members.get(), 0);
    }

    #[test]
    fn rejoin_changes_nothing_and_the_cap_holds() {
        let (metrics, guards) = sessions(2);
        let registry = registry(metrics);
        let me = &guards[0].entry;
        let first = registry.join(me, "2...a", OPEN, 2, 100).expect("join");
        assert!(first.new);
        let again = registry
            .join(
                me,
                "2...a",
                JoinFlags {
                    persistence: true,
                    hidden: true,
                    ..JoinFlags::default()
                },
                2,
                100,
            )
            .expect("rejoin");
        assert!(!again.new);
        assert_eq!(again.flags, OPEN, "the first join's flags stay");
        assert_eq!(registry.member_count("2...a"), 1);
        registry.join(me, "2...b", OPEN, 2, 100).expect("second");
        assert!(matches!(
            registry.join(me, "2...c", OPEN, 2, 100),
            Err(ChannelRefusal::TooMany { max: 2 })
        ));
    }

    #[test]
    fn presence_lists_skip_self_and_hidden_members_and_are_capped() {
        let (metrics, guards) = sessions(5);
        let registry = registry(metrics.clone());
        let hidden = JoinFlags {
            persistence: false,
            hidden: true,
            ..JoinFlags::default()
        };
        registry
            .join(&guards[0].entry, "2...r", hidden, 8, 100)
            .expect("join");
        for g in &guards[1..4] {
            registry
                .join(&g.entry, "2...r", OPEN, 8, 100)
                .expect("join");
        }
        let last = registry
            .join(&guards[4].entry, "2...r", OPEN, 8, 2)
            .expect("join");
        assert_eq!(
            last.presences.len(),
            2,
            "capped at 2 of the 3 visible others"
        );
        assert!(last
            .presences
            .iter()
            .all(|p| p.user_id != guards[0].entry.user_id.to_string()));
        // The hidden member got join events for the 4 visible joins after it; the first visible
        // one got 3.
        assert_eq!(guards[0].entry.outbox.drain().messages.len(), 4);
        assert_eq!(guards[1].entry.outbox.drain().messages.len(), 3);
        assert_eq!(metrics.chat_presence_events_out.get(), 4 + 3 + 2 + 1);
    }

    #[test]
    fn concurrent_joins_and_leaves_never_lose_a_member() {
        let (metrics, guards) = sessions(16);
        let registry = Arc::new(registry(metrics.clone()));
        let threads: Vec<_> = guards
            .iter()
            .map(|g| {
                let (registry, session) = (registry.clone(), g.entry.clone());
                std::thread::spawn(move || {
                    for round in 0..300 {
                        let id = format!("2...c{}", round % 3);
                        registry.join(&session, &id, OPEN, 8, 10).expect("join");
                        // Drain so outboxes never overflow during the test.
                        session.outbox.drain();
                        if round % 2 == 0 {
                            registry.leave(&session, &id).expect("leave");
                        }
                    }
                    registry.leave_all(&session);
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        assert!(registry.is_empty());
        assert_eq!(metrics.chat_members.get(), 0);
        assert_eq!(metrics.chat_channels.get(), 0);
    }
}
