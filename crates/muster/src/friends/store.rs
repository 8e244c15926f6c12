//! Friends in the store: one edge per direction between two users ([`FriendStore`]).

use async_trait::async_trait;
use uuid::Uuid;

use crate::accounts::store::AccountRecord;
use crate::store::StoreError;

/// Nakama's friend states: one edge per direction between two users.
pub mod friend_state {
    pub const FRIEND: i32 = 0;
    pub const INVITE_SENT: i32 = 1;
    pub const INVITE_RECEIVED: i32 = 2;
    pub const BLOCKED: i32 = 3;

    /// What adding a friend does, given the adder's edge to the target (`mine`) and the
    /// target's to the adder (`theirs`): both engines decide alike.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum AddAction {
        /// The target invited the adder: both become friends.
        Accept,
        /// No edge either way: an invite (if the target exists and has room).
        Invite,
        /// Already friends or invited, or blocked either way.
        Nothing,
    }

    pub fn add_action(mine: Option<i32>, theirs: Option<i32>) -> AddAction {
        match (mine, theirs) {
            (Some(INVITE_RECEIVED), Some(INVITE_SENT)) => AddAction::Accept,
            (None, None) | (None, Some(FRIEND | INVITE_SENT | INVITE_RECEIVED)) => {
                AddAction::Invite
            }
            _ => AddAction::Nothing,
        }
    }
}

/// One of a user's edges, with the other user's account.
#[derive(Debug, Clone, PartialEq)]
pub struct FriendRecord {
    pub user: AccountRecord,
    pub state: i32,
    /// The listing's order within a state: when the edge was made (microseconds).
    pub position: i64,
    pub update_time_ms: i64,
    pub metadata: String,
}

/// What an add did for one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FriendAdded {
    /// An invite sent (the target has one received).
    Invited,
    /// The target's invite accepted: both are friends now.
    Accepted,
}

/// Friends, invites and blocks. Each write is durable when its future resolves.
#[async_trait]
pub trait FriendStore: Send + Sync {
    /// `user` adds each of `targets`, as Nakama: accepts a target's invite, or sends one; a
    /// target `user` blocked, one that blocked `user`, one already a friend or invited, one that
    /// does not exist, and one whose edges number `max_edges` already are skipped. Answers what
    /// happened to each target that changed. `LimitReached` when `user`'s own edges would pass
    /// `max_edges` (nothing changes).
    async fn add_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
        now_us: i64,
        max_edges: usize,
    ) -> Result<Vec<(Uuid, FriendAdded)>, StoreError>;

    /// Removes `user`'s edges to `targets` and theirs to `user` (unless they blocked `user`):
    /// unfriends, cancels or rejects invites, unblocks. Answers the targets whose edge to
    /// `user` went too (a friendship or an invite ended for them).
    async fn delete_friends(&self, user: Uuid, targets: Vec<Uuid>)
        -> Result<Vec<Uuid>, StoreError>;

    /// `user` blocks each of `targets` (that exist): its edge becomes blocked, theirs to `user`
    /// goes (unless they blocked `user` too). `LimitReached` past `max_edges`.
    async fn block_friends(
        &self,
        user: Uuid,
        targets: Vec<Uuid>,
        now_us: i64,
        max_edges: usize,
    ) -> Result<(), StoreError>;

    /// `user`'s edges in state order then position, those of `state` only when given, after
    /// `(state, position, other user)` when given; at most `limit`.
    async fn list_friends(
        &self,
        user: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<FriendRecord>, StoreError>;

    /// Friends of `user`'s friends who are not `user` or already `user`'s friends, as
    /// `(referrer, user)` in that order, after `after` when given; at most `limit`.
    async fn friends_of_friends(
        &self,
        user: Uuid,
        after: Option<(Uuid, Uuid)>,
        limit: usize,
    ) -> Result<Vec<(Uuid, Uuid)>, StoreError>;

    /// `user`'s edges to those of `others` it has one to (any state), with the other user's
    /// account; in no particular order.
    async fn friends_among(
        &self,
        user: Uuid,
        others: Vec<Uuid>,
    ) -> Result<Vec<FriendRecord>, StoreError>;

    /// Replaces the metadata (a JSON object, as text) of `user`'s edge to `other`; whether
    /// there was one.
    async fn set_friend_metadata(
        &self,
        user: Uuid,
        other: Uuid,
        metadata: String,
    ) -> Result<bool, StoreError>;

    /// The state of `user`'s edge to `other`, if any.
    async fn friend_state(&self, user: Uuid, other: Uuid) -> Result<Option<i32>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] =
    &[crate::migration!(15, "friends", "0015_friends")];
