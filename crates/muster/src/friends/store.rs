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

    /// Imports `user`'s friends at `provider` (`"facebook"` or `"steam"`, as Nakama writes it in
    /// the edges' metadata) who play here, `friends`, in one transaction, as Nakama's
    /// `importFriendsByUUID`. With `reset`, first deletes each of `user`'s edges and each edge
    /// to `user` that is not a block (Nakama's `resetUserFriends`). Then each of `friends` (each
    /// once; `user` itself and accounts that do not exist are skipped) becomes `user`'s friend,
    /// both edges state 0 with `{"provider": provider}` in their metadata: an invite either way
    /// is accepted (its position kept, `provider` merged into its metadata), missing edges are
    /// made (position `now_us`). One blocked either way, or already a friend, is skipped; so is
    /// one whose new edge would take `user`'s or its own edges past `max_edges` (not an error).
    /// Answers the friends made by this call, in the order given.
    async fn import_friends(
        &self,
        user: Uuid,
        friends: Vec<Uuid>,
        provider: &'static str,
        reset: bool,
        now_us: i64,
        max_edges: usize,
    ) -> Result<Vec<Uuid>, StoreError>;
}

/// Where an import finds one candidate friend: `user`'s edge to it (`mine`) and its edge to
/// `user` (`theirs`), each state and metadata, and how many edges the candidate has.
#[derive(Debug, Clone)]
pub(crate) struct ImportCandidate {
    pub friend: Uuid,
    pub mine: Option<(i32, String)>,
    pub theirs: Option<(i32, String)>,
    pub friend_edges: usize,
}

/// An edge an import writes as a friend's (state 0): inserted at the import's position, or,
/// when there is one, updated in place (its position kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImportEdge {
    pub from: Uuid,
    pub to: Uuid,
    pub metadata: String,
}

/// What an import writes, decided alike on both engines from what they read
/// ([`plan_import`]): the edges, and the friends they make.
#[derive(Debug, Clone, Default)]
pub(crate) struct ImportPlan {
    pub edges: Vec<ImportEdge>,
    pub friends: Vec<Uuid>,
}

/// `metadata` (a JSON object, as text) with `provider` set, as Nakama's
/// `metadata || jsonb_build_object('provider', …)`; metadata that is not an object is replaced.
pub(crate) fn with_provider(metadata: Option<&str>, provider: &str) -> String {
    let mut object = metadata
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|value| match value {
            serde_json::Value::Object(object) => Some(object),
            _ => None,
        })
        .unwrap_or_default();
    object.insert("provider".into(), provider.into());
    serde_json::Value::Object(object).to_string()
}

/// Decides an import for `user` (who has `user_edges` edges) from its `candidates`, each of
/// them an existing account other than `user`, once: blocked either way or already friends
/// both ways is skipped; otherwise both edges become a friend's, unless a missing one would
/// take its source's edges past `max_edges` (then the candidate is skipped).
pub(crate) fn plan_import(
    user: Uuid,
    user_edges: usize,
    candidates: Vec<ImportCandidate>,
    provider: &str,
    max_edges: usize,
) -> ImportPlan {
    use friend_state::{BLOCKED, FRIEND};
    let mut mine_count = user_edges;
    let mut plan = ImportPlan::default();
    for candidate in candidates {
        let state = |edge: &Option<(i32, String)>| edge.as_ref().map(|(state, _)| *state);
        let (mine, theirs) = (state(&candidate.mine), state(&candidate.theirs));
        if mine == Some(BLOCKED) || theirs == Some(BLOCKED) {
            continue;
        }
        if mine == Some(FRIEND) && theirs == Some(FRIEND) {
            continue;
        }
        if mine.is_none() && mine_count >= max_edges {
            continue;
        }
        if theirs.is_none() && candidate.friend_edges >= max_edges {
            continue;
        }
        if mine.is_none() {
            mine_count += 1;
        }
        let metadata = |edge: &Option<(i32, String)>| {
            with_provider(edge.as_ref().map(|(_, m)| m.as_str()), provider)
        };
        plan.edges.push(ImportEdge {
            from: user,
            to: candidate.friend,
            metadata: metadata(&candidate.mine),
        });
        plan.edges.push(ImportEdge {
            from: candidate.friend,
            to: user,
            metadata: metadata(&candidate.theirs),
        });
        plan.friends.push(candidate.friend);
    }
    plan
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] =
    &[crate::migration!(15, "friends", "0015_friends")];

#[cfg(test)]
mod tests {
    use super::friend_state::{FRIEND, INVITE_SENT};
    use super::*;

    #[test]
    fn the_provider_is_merged_into_an_object_and_replaces_anything_else() {
        let merged = with_provider(Some(r#"{"note":"x","provider":"steam"}"#), "facebook");
        assert_eq!(merged, r#"{"note":"x","provider":"facebook"}"#);
        for other in [None, Some("[1]"), Some("not JSON"), Some("")] {
            assert_eq!(with_provider(other, "steam"), r#"{"provider":"steam"}"#);
        }
    }

    #[test]
    fn a_lone_edge_is_made_whole_and_counts_only_what_is_new() {
        let (user, lone, invited, fresh) = (
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
            Uuid::new_v4(),
        );
        let candidate = |friend, mine, theirs| ImportCandidate {
            friend,
            mine,
            theirs,
            friend_edges: 0,
        };
        // The user has 2 edges (to `lone` and `invited`), at a bound of 3.
        let plan = plan_import(
            user,
            2,
            vec![
                candidate(lone, Some((FRIEND, "{}".into())), None),
                candidate(invited, Some((INVITE_SENT, "{}".into())), None),
                candidate(fresh, None, None),
            ],
            "steam",
            3,
        );
        assert_eq!(plan.friends, vec![lone, invited, fresh]);
        assert_eq!(plan.edges.len(), 6);
        // One more new edge of the user's is past the bound.
        let plan = plan_import(
            user,
            3,
            vec![candidate(fresh, None, None), candidate(lone, None, None)],
            "steam",
            3,
        );
        assert!(plan.friends.is_empty() && plan.edges.is_empty());
    }
}
