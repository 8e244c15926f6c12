//! Status, as Nakama has it: a session may follow users (`status_follow`, by id or username)
//! and is then told whenever one of their sessions appears online, changes its status message
//! or goes offline (`status_presence_event`); a session appears online when it connects with
//! `status=true` or sends `status_update` with a status, and offline with an empty update.
//!
//! Built on the router's channels, so it works across nodes with no machinery of its own:
//! each user has a status channel (`status.<user id>`). A session that appears online is a
//! visible member of its user's channel that is told nothing (`JoinFlags::publisher`); its
//! presence carries its status message. A follower is a hidden member kept on its own node only
//! (`JoinFlags::follower`). Joins and leaves of visible members reach every node's followers
//! as channel presence changes do (and a dead node's sessions leave for everyone), and
//! `presence::StatusPresence` words them as `status_presence_event`s.

pub mod config;
pub(crate) mod presence;

use std::sync::Arc;

use presence::Statuses;

use muster_proto::realtime::{Message, Status, StatusFollow, StatusUnfollow, StatusUpdate};
use uuid::Uuid;

use crate::accounts::Accounts;
use crate::cluster::{JoinLimits, Router};
use crate::session::channels::JoinFlags;
use crate::session::registry::SessionObserver;
use crate::session::{Answer, Session};
use crate::status::config::StatusConfig;
use crate::store::StoreError;

/// Status channels' ids start with this; it is no Nakama channel id (those start with a digit),
/// so no chat request can name one.
pub const CHANNEL_PREFIX: &str = "status.";

/// Most sessions of one followed user listed in a follow's answer.
const MAX_LISTED_SESSIONS: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("{0}")]
    Invalid(String),
    /// The session follows `status.max_follows_per_session` users already.
    #[error("Too many users followed on this socket (at most {0}); unfollow some first.")]
    TooMany(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StatusError {
    pub fn reason(&self) -> &'static str {
        match self {
            StatusError::Invalid(_) => "invalid",
            StatusError::TooMany(_) => "too_many_follows",
            StatusError::Store(_) => "storage",
        }
    }
}

pub struct StatusService {
    router: Arc<dyn Router>,
    accounts: Arc<Accounts>,
    statuses: Arc<Statuses>,
    config: StatusConfig,
}

/// The status channel of `user`.
pub fn channel_of(user: Uuid) -> String {
    format!("{CHANNEL_PREFIX}{user}")
}

const FOLLOWER: JoinFlags = JoinFlags {
    persistence: false,
    hidden: true,
    follower: true,
    publisher: false,
};

const PUBLISHER: JoinFlags = JoinFlags {
    persistence: false,
    hidden: false,
    follower: false,
    publisher: true,
};

impl StatusService {
    /// The status a session of this node last set (`status_update`), if it set one.
    pub fn status_of(&self, session: Uuid) -> Option<String> {
        self.statuses.get(&session).map(|status| status.to_string())
    }

    /// The service writing its sessions' status messages into `statuses` (the map the
    /// channels' `presence::StatusPresence` reads).
    pub fn new(
        router: Arc<dyn Router>,
        accounts: Arc<Accounts>,
        statuses: Arc<Statuses>,
        config: &StatusConfig,
    ) -> StatusService {
        StatusService {
            router,
            accounts,
            statuses,
            config: config.clone(),
        }
    }

    /// Answers one status request from `session`.
    pub async fn handle(
        &self,
        message: Message,
        session: &Arc<Session>,
    ) -> Result<Answer, StatusError> {
        match message {
            Message::StatusFollow(request) => self
                .follow(session, request)
                .await
                .map(|status| Answer::Reply(Message::Status(status))),
            Message::StatusUnfollow(request) => {
                self.unfollow(session, request).map(|()| Answer::Done)
            }
            Message::StatusUpdate(request) => self.update(session, request).map(|()| Answer::Done),
            other => {
                tracing::error!(kind = other.kind(), "not a status request");
                Ok(Answer::Silent)
            }
        }
    }

    /// The session appears online with an empty status (a socket opened with `status=true`).
    pub fn appear_online(&self, session: &Arc<Session>) {
        if let Err(error) = self.update(
            session,
            StatusUpdate {
                status: Some(String::new()),
            },
        ) {
            tracing::debug!(%error, "status: could not appear online");
        }
    }

    /// `nk.statusFollow`: `session` (one of this node's) follows the users of `user_ids`, as
    /// a `status_follow` of theirs would (those that exist, not its own user, within
    /// `status.max_follows_per_session`); no presences are answered.
    pub async fn follow_users(
        &self,
        session: &Arc<Session>,
        user_ids: Vec<String>,
    ) -> Result<(), StatusError> {
        let request = StatusFollow {
            user_ids,
            usernames: Vec::new(),
        };
        self.follow(session, request).await.map(|_| ())
    }

    /// `nk.statusUnfollow`: `session` stops following the users of `user_ids`.
    pub fn unfollow_users(
        &self,
        session: &Arc<Session>,
        user_ids: Vec<String>,
    ) -> Result<(), StatusError> {
        self.unfollow(session, StatusUnfollow { user_ids })
    }

    async fn follow(
        &self,
        session: &Arc<Session>,
        request: StatusFollow,
    ) -> Result<Status, StatusError> {
        let max = self.config.max_follows_per_session;
        if request.user_ids.len() + request.usernames.len() > max {
            return Err(StatusError::TooMany(max));
        }
        let ids = parse_ids(&request.user_ids)?;
        if request.usernames.iter().any(String::is_empty) {
            return Err(StatusError::Invalid("Username must not be empty.".into()));
        }
        // Only users that exist are followed; oneself is not.
        let mut users: Vec<Uuid> = if ids.is_empty() && request.usernames.is_empty() {
            Vec::new()
        } else {
            self.accounts
                .existing(ids, request.usernames)
                .await?
                .into_iter()
                .filter(|id| *id != session.user_id)
                .collect()
        };
        users.sort_unstable();
        users.dedup();
        let mut presences = Vec::new();
        for user in users {
            let channel = channel_of(user);
            let new = session.channels.find(&channel).is_none();
            if new && session.channels.follow_count() >= max {
                return Err(StatusError::TooMany(max));
            }
            let limits = JoinLimits {
                max_channels: usize::MAX,
                max_listed: MAX_LISTED_SESSIONS,
            };
            if let Ok(joined) = self
                .router
                .join_channel(session, &channel, FOLLOWER, limits)
            {
                presences.extend(joined.presences);
            }
        }
        Ok(Status { presences })
    }

    fn unfollow(&self, session: &Arc<Session>, request: StatusUnfollow) -> Result<(), StatusError> {
        let ids = parse_ids(&request.user_ids)?;
        for user in ids {
            let channel = channel_of(user);
            if session
                .channels
                .find(&channel)
                .is_some_and(|joined| joined.flags.follower)
            {
                let _ = self.router.leave_channel(session, &channel);
            }
        }
        Ok(())
    }

    /// A status appears (or replaces the previous one: followers see the old one leave and the
    /// new one join); none appears offline.
    fn update(&self, session: &Arc<Session>, request: StatusUpdate) -> Result<(), StatusError> {
        if let Some(status) = &request.status {
            if status.len() > self.config.max_status_bytes {
                return Err(StatusError::Invalid(format!(
                    "A status is at most {} bytes.",
                    self.config.max_status_bytes
                )));
            }
        }
        let channel = channel_of(session.user_id);
        if session
            .channels
            .find(&channel)
            .is_some_and(|joined| joined.flags.publisher)
        {
            let _ = self.router.leave_channel(session, &channel);
        }
        match &request.status {
            Some(status) => {
                self.statuses
                    .insert(session.session_id, Box::from(status.as_str()));
            }
            None => {
                self.statuses.remove(&session.session_id);
            }
        }
        if request.status.is_some() {
            let limits = JoinLimits {
                max_channels: usize::MAX,
                max_listed: 0,
            };
            if let Err(refusal) = self
                .router
                .join_channel(session, &channel, PUBLISHER, limits)
            {
                tracing::debug!(?refusal, "status: could not appear online");
            }
        }
        Ok(())
    }
}

/// User ids as given; the first that is not a UUID refuses the request.
fn parse_ids(ids: &[String]) -> Result<Vec<Uuid>, StatusError> {
    ids.iter()
        .map(|id| {
            Uuid::parse_str(id)
                .map_err(|_| StatusError::Invalid(format!("Invalid user ID '{id}'.")))
        })
        .collect()
}

/// A session that ends forgets its status message (its channels are left by the router).
impl SessionObserver for StatusService {
    fn session_closed(&self, session: &Arc<Session>) {
        self.statuses.remove(&session.session_id);
    }
}
