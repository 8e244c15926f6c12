//! The presence events of status channels: `status_presence_event` to followers; every other
//! channel's events are left to the format they were built with (chat's).

use std::sync::Arc;

use dashmap::DashMap;
use muster_proto::realtime::{Envelope, Message, StatusPresenceEvent, UserPresence};
use uuid::Uuid;

use super::CHANNEL_PREFIX;
use crate::session::channels::PresenceEvents;
use crate::session::fanout::Encoded;
use crate::session::Session;

/// The status message of each session that appears online on this node, by session id: kept
/// here rather than in every session, most of which never set one.
pub type Statuses = DashMap<Uuid, Box<str>>;

pub struct StatusPresence {
    others: Arc<dyn PresenceEvents>,
    statuses: Arc<Statuses>,
}

impl StatusPresence {
    /// Status channels' events, with the messages in `statuses`, and `others`' for every
    /// other channel.
    pub fn over(others: Arc<dyn PresenceEvents>, statuses: Arc<Statuses>) -> StatusPresence {
        StatusPresence { others, statuses }
    }
}

fn event(joins: Vec<UserPresence>, leaves: Vec<UserPresence>) -> Encoded {
    Encoded::new(Envelope::new(
        String::new(),
        Message::StatusPresenceEvent(StatusPresenceEvent { joins, leaves }),
    ))
}

impl PresenceEvents for StatusPresence {
    fn joined(&self, channel_id: &str, who: UserPresence) -> Encoded {
        if channel_id.starts_with(CHANNEL_PREFIX) {
            event(vec![who], Vec::new())
        } else {
            self.others.joined(channel_id, who)
        }
    }

    fn left(&self, channel_id: &str, who: UserPresence) -> Encoded {
        if channel_id.starts_with(CHANNEL_PREFIX) {
            event(Vec::new(), vec![who])
        } else {
            self.others.left(channel_id, who)
        }
    }

    fn status_of(&self, session: &Session) -> Option<String> {
        self.statuses
            .get(&session.session_id)
            .map(|status| status.to_string())
    }
}
