//! Friends, as Nakama has them: one edge per direction between two users — friend, invite sent,
//! invite received, blocked. Adding a user who invited you accepts; adding anyone else invites
//! them; deleting ends a friendship, cancels or rejects an invite, or lifts a block; blocking
//! ends whatever the other had with you. Each change the other user should know of is a
//! persistent notification with Nakama's code, delivered at once on any node.

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod cursor;
mod import;

pub use import::ImportError;

use std::sync::Arc;

use muster_proto::api::{Friend, FriendList, FriendOfFriend, FriendsOfFriendsList};
use uuid::Uuid;

use crate::accounts::lifecycle::public_user;
use crate::accounts::Accounts;
use crate::cluster::Router;
use crate::friends::store::friend_state::BLOCKED;
use crate::friends::store::{FriendAdded, FriendStore};
use crate::notifications::{code, NewNotification, Notifications};
use crate::store::StoreError;

/// Most users one add, delete or block names.
pub const MAX_TARGETS: usize = 1000;
/// Most edges one listing returns (Nakama's bound, and its default).
pub const MAX_LIST_LIMIT: usize = 1000;
/// Largest metadata of one edge, in bytes.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;
/// Most friends of friends one listing returns (Nakama's bound); 10 when not given.
pub const MAX_FRIENDS_OF_FRIENDS_LIMIT: usize = 100;
/// Most accounts one import of a player's friends at an identity provider names (Facebook and
/// Steam bound their friends lists; and each new friend gets a notification, at most
/// [`crate::notifications::MAX_PER_SEND`] at once).
pub const MAX_IMPORT: usize = 1000;
/// The subject of the notification a player's friend gets when the player's import made them
/// friends (Nakama's).
pub const FRIEND_JOIN_GAME_SUBJECT: &str = "Your friend has just joined the game";

#[derive(Debug, thiserror::Error)]
pub enum FriendError {
    #[error("{0}")]
    Invalid(String),
    /// The caller's friends, invites and blocks are at `friends.max_per_user`.
    #[error("Too many friends, invites and blocks (at most {0}); delete some first.")]
    TooMany(usize),
    /// Past `friends.adds_per_user_per_minute`.
    #[error("Too many friend requests: slow down.")]
    TooFast,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for FriendError {
    fn from(error: StoreError) -> Self {
        FriendError::Store(error)
    }
}

/// Who a request names: ids and usernames, as the routes receive them.
pub struct Targets {
    pub ids: Vec<String>,
    pub usernames: Vec<String>,
}

/// The verb of a request, for Nakama's messages.
#[derive(Clone, Copy)]
enum Verb {
    Add,
    Delete,
    Block,
}

pub struct Friends {
    store: Arc<dyn FriendStore>,
    accounts: Arc<Accounts>,
    notifications: Arc<Notifications>,
    router: Arc<dyn Router>,
    max_per_user: usize,
    /// Adds per user per minute: invites are notifications to others, so they are rationed.
    adds: crate::base::ratelimit::KeyedLimit<Uuid>,
}

impl Friends {
    pub fn new(
        store: Arc<dyn FriendStore>,
        accounts: Arc<Accounts>,
        notifications: Arc<Notifications>,
        router: Arc<dyn Router>,
        config: &crate::friends::config::FriendsConfig,
    ) -> Friends {
        Friends {
            store,
            accounts,
            notifications,
            router,
            max_per_user: config.max_per_user,
            adds: crate::base::ratelimit::KeyedLimit::per_minute(config.adds_per_user_per_minute),
        }
    }

    /// Forgets rate-limit keys whose buckets are full again (housekeeping).
    pub fn prune_limits(&self) {
        self.adds.prune();
    }

    /// `user` (named `username`) adds `targets`: invites them, or accepts their invites. Those
    /// blocked either way, already friends or invited, or unknown are skipped, as in Nakama.
    pub async fn add(
        &self,
        user: Uuid,
        username: &str,
        targets: Targets,
    ) -> Result<(), FriendError> {
        if !self.adds.allow(user) {
            return Err(FriendError::TooFast);
        }
        let ids = self.resolve(user, targets, Verb::Add).await?;
        if ids.is_empty() {
            return Err(FriendError::Invalid(
                "No valid ID or username was provided.".into(),
            ));
        }
        let done = self
            .store
            .add_friends(user, ids, now_us(), self.max_per_user)
            .await
            .map_err(|e| self.limited(e))?;
        let notices = done
            .into_iter()
            .map(|(target, added)| match added {
                FriendAdded::Invited => (
                    target,
                    code::FRIEND_REQUEST,
                    format!("{username} wants to add you as a friend"),
                ),
                FriendAdded::Accepted => (
                    target,
                    code::FRIEND_ACCEPT,
                    format!("{username} accepted your friend request"),
                ),
            })
            .collect();
        self.tell(user, username, notices).await;
        Ok(())
    }

    /// `user` (named `username`) imports their friends at `provider` (`"facebook"` or
    /// `"steam"`) who play here, `friends` (their accounts; at most [`MAX_IMPORT`], `user`
    /// itself and repeats dropped), as Nakama's Facebook and Steam imports: each becomes a
    /// friend at once (an invite either way is accepted), unless blocked either way or past
    /// `friends.max_per_user` (skipped). With `reset`, `user`'s friends and invites both ways go
    /// first (blocks stay). Each new friend gets a persistent `FRIEND_JOIN_GAME` notification
    /// from `user`.
    pub async fn import(
        &self,
        user: Uuid,
        username: &str,
        provider: &'static str,
        friends: Vec<Uuid>,
        reset: bool,
    ) -> Result<(), FriendError> {
        if friends.len() > MAX_IMPORT {
            return Err(FriendError::Invalid(format!(
                "At most {MAX_IMPORT} friends imported at once."
            )));
        }
        let mut seen = std::collections::HashSet::with_capacity(friends.len());
        let friends: Vec<Uuid> = friends
            .into_iter()
            .filter(|friend| *friend != user && seen.insert(*friend))
            .collect();
        if friends.is_empty() && !reset {
            return Ok(());
        }
        let made = self
            .store
            .import_friends(user, friends, provider, reset, now_us(), self.max_per_user)
            .await?;
        let notices = made
            .into_iter()
            .map(|friend| {
                (
                    friend,
                    code::FRIEND_JOIN_GAME,
                    FRIEND_JOIN_GAME_SUBJECT.to_string(),
                )
            })
            .collect();
        self.tell(user, username, notices).await;
        Ok(())
    }

    /// `user` deletes `targets`: friendships end, invites are cancelled or rejected, blocks
    /// lifted. A friend or inviter who lost their edge is told.
    pub async fn delete(
        &self,
        user: Uuid,
        username: &str,
        targets: Targets,
    ) -> Result<(), FriendError> {
        let ids = self.resolve(user, targets, Verb::Delete).await?;
        if ids.is_empty() {
            return Ok(());
        }
        let told = self.store.delete_friends(user, ids).await?;
        let notices = told
            .into_iter()
            .map(|target| {
                (
                    target,
                    code::FRIEND_REMOVE,
                    format!("{username} removed you as a friend"),
                )
            })
            .collect();
        self.tell(user, username, notices).await;
        Ok(())
    }

    /// `user` blocks `targets`: they can no longer invite `user` or chat with them directly.
    pub async fn block(&self, user: Uuid, targets: Targets) -> Result<(), FriendError> {
        let ids = self.resolve(user, targets, Verb::Block).await?;
        if ids.is_empty() {
            return Ok(());
        }
        self.store
            .block_friends(user, ids, now_us(), self.max_per_user)
            .await
            .map_err(|e| self.limited(e))
    }

    /// A page of `user`'s edges: friends first, then invites sent, received, blocks (or only
    /// `state`), each by when it was made; `limit` 1–1,000 (1,000 when 0, as Nakama).
    pub async fn list(
        &self,
        user: Uuid,
        limit: usize,
        state: Option<i32>,
        cursor: &str,
    ) -> Result<FriendList, FriendError> {
        let limit = if limit == 0 { MAX_LIST_LIMIT } else { limit };
        if limit > MAX_LIST_LIMIT {
            return Err(FriendError::Invalid(
                "Invalid limit - limit must be between 1 and 1000.".into(),
            ));
        }
        if state.is_some_and(|s| !(0..=3).contains(&s)) {
            return Err(FriendError::Invalid(
                "Invalid state - state must be between 0 and 3.".into(),
            ));
        }
        let after = if cursor.is_empty() {
            None
        } else {
            let position = cursor::decode(cursor)
                .filter(|(s, _, _)| state.is_none_or(|state| state == *s))
                .ok_or_else(|| FriendError::Invalid("Cursor is invalid.".into()))?;
            Some(position)
        };
        // One more than asked: whether there is a next page.
        let mut records = self
            .store
            .list_friends(user, state, after, limit + 1)
            .await?;
        let more = records.len() > limit;
        records.truncate(limit);
        let cursor = match records.last() {
            Some(last) if more => cursor::encode(last.state, last.position, last.user.id),
            _ => String::new(),
        };
        let friends = records
            .into_iter()
            .map(|record| {
                let online = self.router.is_online(record.user.id);
                Friend {
                    state: record.state,
                    update_time: crate::base::clock::rfc3339(record.update_time_ms),
                    metadata: record.metadata,
                    user: public_user(record.user, online),
                }
            })
            .collect();
        Ok(FriendList { friends, cursor })
    }

    /// A page of the friends of `user`'s friends who are not `user`'s friends already (nor
    /// `user`), each with the friend they came through; `limit` 1–100 (10 when 0, as Nakama).
    pub async fn friends_of_friends(
        &self,
        user: Uuid,
        limit: usize,
        cursor: &str,
    ) -> Result<FriendsOfFriendsList, FriendError> {
        let limit = if limit == 0 { 10 } else { limit };
        if limit > MAX_FRIENDS_OF_FRIENDS_LIMIT {
            return Err(FriendError::Invalid(
                "Invalid limit - limit must be between 1 and 100.".into(),
            ));
        }
        let after = if cursor.is_empty() {
            None
        } else {
            Some(
                cursor::decode_pair(cursor)
                    .ok_or_else(|| FriendError::Invalid("Cursor is invalid.".into()))?,
            )
        };
        let mut pairs = self
            .store
            .friends_of_friends(user, after, limit + 1)
            .await?;
        let more = pairs.len() > limit;
        pairs.truncate(limit);
        let cursor = match pairs.last() {
            Some((referrer, friend)) if more => cursor::encode_pair(*referrer, *friend),
            _ => String::new(),
        };
        let mut ids: Vec<Uuid> = pairs.iter().map(|(_, friend)| *friend).collect();
        ids.sort_unstable();
        ids.dedup();
        let router = &self.router;
        let users = self.accounts.public_users(ids, |id| router.is_online(id));
        let users = users.await?;
        let friends_of_friends = pairs
            .into_iter()
            .filter_map(|(referrer, friend)| {
                Some(FriendOfFriend {
                    referrer: referrer.to_string(),
                    user: users.get(&friend)?.clone(),
                })
            })
            .collect();
        Ok(FriendsOfFriendsList {
            friends_of_friends,
            cursor,
        })
    }

    /// `user`'s edges to those of `others` (ids) it has one to, in the order asked: Nakama's
    /// `GetFriends` (`nk.usersGetFriendStatus`). At most [`MAX_TARGETS`] ids.
    pub async fn status_among(
        &self,
        user: Uuid,
        others: &[String],
    ) -> Result<Vec<Friend>, FriendError> {
        if others.len() > MAX_TARGETS {
            return Err(FriendError::Invalid(format!(
                "At most {MAX_TARGETS} user IDs at once."
            )));
        }
        let mut ids: Vec<Uuid> = Vec::with_capacity(others.len());
        for id in others {
            let id = Uuid::parse_str(id)
                .map_err(|_| FriendError::Invalid(format!("Invalid user ID '{id}'.")))?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut records = self.store.friends_among(user, ids.clone()).await?;
        records.sort_by_key(|record| ids.iter().position(|id| *id == record.user.id));
        Ok(records
            .into_iter()
            .map(|record| {
                let online = self.router.is_online(record.user.id);
                Friend {
                    state: record.state,
                    update_time: crate::base::clock::rfc3339(record.update_time_ms),
                    metadata: record.metadata,
                    user: public_user(record.user, online),
                }
            })
            .collect())
    }

    /// Replaces the metadata (a JSON object, at most [`MAX_METADATA_BYTES`]) of `user`'s edge
    /// to `other`; no edge is no error, as in Nakama. Whether there was one.
    pub async fn set_metadata(
        &self,
        user: Uuid,
        other: Uuid,
        metadata: &str,
    ) -> Result<bool, FriendError> {
        if metadata.len() > MAX_METADATA_BYTES {
            return Err(FriendError::Invalid(format!(
                "Friend metadata must be at most {MAX_METADATA_BYTES} bytes."
            )));
        }
        if !serde_json::from_str::<serde_json::Value>(metadata).is_ok_and(|v| v.is_object()) {
            return Err(FriendError::Invalid(
                "Friend metadata must be a JSON object.".into(),
            ));
        }
        Ok(self
            .store
            .set_friend_metadata(user, other, metadata.to_owned())
            .await?)
    }

    /// Whether `by` has blocked `user` (a direct chat between them is refused).
    pub async fn blocked(&self, by: Uuid, user: Uuid) -> Result<bool, StoreError> {
        Ok(self.store.friend_state(by, user).await? == Some(BLOCKED))
    }

    fn limited(&self, error: StoreError) -> FriendError {
        match error {
            StoreError::LimitReached => FriendError::TooMany(self.max_per_user),
            other => FriendError::Store(other),
        }
    }

    /// The ids `targets` names, each once, without the caller (refused, as Nakama does).
    async fn resolve(
        &self,
        user: Uuid,
        targets: Targets,
        verb: Verb,
    ) -> Result<Vec<Uuid>, FriendError> {
        if targets.ids.len() + targets.usernames.len() > MAX_TARGETS {
            return Err(FriendError::Invalid(format!(
                "At most {MAX_TARGETS} user IDs and usernames at once."
            )));
        }
        let self_refused = || {
            FriendError::Invalid(
                match verb {
                    Verb::Add => "Cannot add self as friend.",
                    Verb::Delete => "Cannot delete self.",
                    Verb::Block => "Cannot block self.",
                }
                .into(),
            )
        };
        let mut ids = Vec::with_capacity(targets.ids.len() + targets.usernames.len());
        for id in &targets.ids {
            let id = Uuid::parse_str(id)
                .map_err(|_| FriendError::Invalid(format!("Invalid user ID '{id}'.")))?;
            if id == user {
                return Err(self_refused());
            }
            ids.push(id);
        }
        if targets.usernames.iter().any(String::is_empty) {
            return Err(FriendError::Invalid("Username must not be empty.".into()));
        }
        if !targets.usernames.is_empty() {
            for id in self
                .accounts
                .existing(Vec::new(), targets.usernames)
                .await?
            {
                if id == user {
                    return Err(self_refused());
                }
                ids.push(id);
            }
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(ids)
    }

    /// Persistent notifications from `user` to each target; a failure is logged, not the
    /// caller's (the friendship changed, as in Nakama).
    async fn tell(&self, user: Uuid, username: &str, notices: Vec<(Uuid, i32, String)>) {
        if notices.is_empty() {
            return;
        }
        let content = serde_json::json!({ "username": username }).to_string();
        let batch = notices
            .into_iter()
            .map(|(target, code, subject)| NewNotification {
                user_id: target,
                subject,
                content: content.clone(),
                code,
                sender_id: Some(user),
                persistent: true,
            })
            .collect();
        if let Err(error) = self.notifications.send(batch).await {
            tracing::warn!(%error, "friends: a notification could not be sent");
        }
    }
}

fn now_us() -> i64 {
    crate::base::clock::now_ms() * 1000
}
