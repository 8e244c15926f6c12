//! A session as a match sees it: its presence and where the match's messages to it go.

use std::sync::Arc;

use muster_proto::realtime::UserPresence;

use crate::cluster::Recipient;
use crate::session::Session;

/// One session in one match, as the match sees it.
#[derive(Clone)]
pub struct Member {
    pub presence: UserPresence,
    /// Where the match's messages to this member go.
    pub recipient: Recipient,
}

impl Member {
    /// The session a join request came from, as a member.
    pub fn of(session: &Arc<Session>) -> Member {
        Member {
            presence: session.presence(),
            recipient: Recipient::local(session),
        }
    }
}
