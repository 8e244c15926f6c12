//! Groups in the store: their rows, the trait each engine implements, and what a change of
//! membership does ([`plan`]), decided once for both engines from what the engine read under
//! its lock (the group row and the states of the caller and the targets).

use async_trait::async_trait;
use uuid::Uuid;

use crate::accounts::store::AccountRecord;
use crate::store::StoreError;

/// A user's state in a group, as Nakama numbers them.
pub mod state {
    pub const SUPERADMIN: i32 = 0;
    pub const ADMIN: i32 = 1;
    pub const MEMBER: i32 = 2;
    pub const JOIN_REQUEST: i32 = 3;
    pub const BANNED: i32 = 4;

    /// Whether `state` counts in a group's `edge_count` (and may join its chat).
    pub fn is_member(state: i32) -> bool {
        (SUPERADMIN..=MEMBER).contains(&state)
    }
}

use state::{ADMIN, BANNED, JOIN_REQUEST, MEMBER, SUPERADMIN};

/// A group's row.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupRecord {
    pub id: Uuid,
    pub creator_id: Uuid,
    pub name: String,
    pub description: String,
    pub avatar_url: String,
    pub lang_tag: String,
    pub metadata: String,
    pub open: bool,
    pub edge_count: i32,
    pub max_count: i32,
    pub create_time_ms: i64,
    pub update_time_ms: i64,
}

/// The fields of a group an update changes; `None` leaves one as it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupChanges {
    pub name: Option<String>,
    pub description: Option<String>,
    pub avatar_url: Option<String>,
    pub lang_tag: Option<String>,
    pub open: Option<bool>,
    pub metadata: Option<String>,
    pub max_count: Option<i32>,
}

impl GroupChanges {
    pub fn is_empty(&self) -> bool {
        *self == GroupChanges::default()
    }
}

/// Who asks for a change: a user (held to their state in the group) or server code (allowed
/// what a superadmin is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    User(Uuid),
    Server,
}

/// A change of membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberChange {
    /// The actor joins (an open group) or asks to (a closed one).
    Join,
    /// The actor leaves.
    Leave,
    /// Targets become members (a join request is accepted).
    Add,
    /// Targets leave (a join request is rejected).
    Kick,
    /// Targets leave and may not come back.
    Ban,
    /// Targets move one state up (a join request is accepted).
    Promote,
    /// Targets move one state down.
    Demote,
}

impl From<GroupRefusal> for StoreError {
    fn from(refusal: GroupRefusal) -> StoreError {
        StoreError::refused(refusal)
    }
}

/// Why a change was refused; nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GroupRefusal {
    #[error("Group not found.")]
    NotFound,
    #[error("Group not found or permission denied.")]
    PermissionDenied,
    #[error("Group is full.")]
    Full,
    #[error("Cannot leave group when you are the last superadmin.")]
    LastSuperadmin,
    #[error("One or more users not found.")]
    UserNotFound,
    #[error("Group name is in use.")]
    NameInUse,
    #[error("You are banned from this group.")]
    Banned,
    /// The actor is in (or asked to join) `groups.max_per_user` groups already.
    #[error("Too many groups joined or asked to join.")]
    TooManyGroups,
}

/// What the engine read, under its lock, before a change.
#[derive(Debug, Clone)]
pub struct Before {
    pub open: bool,
    pub edge_count: i32,
    pub max_count: i32,
    /// The acting user's state (`None`: not in the group, or server code).
    pub actor_state: Option<i32>,
    /// Superadmins in the group now.
    pub superadmins: usize,
    /// Each target once: its state in the group, whether the account exists, and how many
    /// groups it is in or asked to join.
    pub targets: Vec<Target>,
}

#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub id: Uuid,
    pub state: Option<i32>,
    pub exists: bool,
    pub groups: usize,
}

/// One user's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub user: Uuid,
    pub from: Option<i32>,
    /// `None`: the user's row goes.
    pub to: Option<i32>,
}

impl Step {
    /// Whether the user became a member (from nothing or a join request).
    pub fn became_member(&self) -> bool {
        !self.from.is_some_and(state::is_member) && self.to.is_some_and(state::is_member)
    }

    /// Whether the user stopped being a member (left, kicked or banned).
    pub fn stopped_being_member(&self) -> bool {
        self.from.is_some_and(state::is_member) && !self.to.is_some_and(state::is_member)
    }
}

/// What a change does: the rows to write and the new member count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub edge_count: i32,
}

/// Decides `change` by `actor` on targets (`before.targets`; for a join or leave, the actor
/// itself), as Nakama does: kicks, bans and promotions need an admin or superadmin, and only
/// act on users of a lower state (a superadmin on anyone but the last superadmin); an add
/// accepts join requests; a full group refuses new members; `max_groups` bounds the groups
/// one user is in or has asked to join.
pub fn plan(
    change: MemberChange,
    actor: Actor,
    before: &Before,
    max_groups: usize,
) -> Result<Plan, GroupRefusal> {
    let mut plan = Plan {
        steps: Vec::new(),
        edge_count: before.edge_count,
    };
    let mut superadmins = before.superadmins;
    match change {
        MemberChange::Join => {
            let Some(me) = before.targets.first() else {
                return Ok(plan);
            };
            match me.state {
                Some(BANNED) => return Err(GroupRefusal::Banned),
                Some(_) => return Ok(plan),
                None => {}
            }
            if before.edge_count >= before.max_count {
                return Err(GroupRefusal::Full);
            }
            if me.groups >= max_groups {
                return Err(GroupRefusal::TooManyGroups);
            }
            let to = if before.open { MEMBER } else { JOIN_REQUEST };
            plan.push(me.id, None, Some(to));
        }
        MemberChange::Leave => {
            let Some(me) = before.targets.first() else {
                return Ok(plan);
            };
            match me.state {
                None | Some(BANNED) => return Ok(plan),
                Some(SUPERADMIN) if superadmins <= 1 => {
                    // Nakama: the last superadmin may leave only a group with no one else in it.
                    if before.edge_count > 1 {
                        return Err(GroupRefusal::LastSuperadmin);
                    }
                }
                Some(_) => {}
            }
            plan.push(me.id, me.state, None);
        }
        MemberChange::Add
        | MemberChange::Kick
        | MemberChange::Ban
        | MemberChange::Promote
        | MemberChange::Demote => {
            let rank = match actor {
                Actor::Server => SUPERADMIN,
                Actor::User(_) => match before.actor_state {
                    Some(rank @ (SUPERADMIN | ADMIN)) => rank,
                    _ => return Err(GroupRefusal::PermissionDenied),
                },
            };
            if change == MemberChange::Add && before.targets.iter().any(|t| !t.exists) {
                return Err(GroupRefusal::UserNotFound);
            }
            for target in &before.targets {
                if Actor::User(target.id) == actor {
                    continue;
                }
                let Some(from) = target.state else {
                    if change == MemberChange::Add && target.groups < max_groups {
                        plan.push(target.id, None, Some(MEMBER));
                    }
                    continue;
                };
                let to = match change {
                    MemberChange::Add => (from == JOIN_REQUEST).then_some(Some(MEMBER)),
                    MemberChange::Kick | MemberChange::Ban => {
                        let allowed = if rank == SUPERADMIN {
                            from != SUPERADMIN || superadmins > 1
                        } else {
                            from > ADMIN
                        };
                        let to = if change == MemberChange::Ban {
                            Some(BANNED)
                        } else {
                            None
                        };
                        (allowed && Some(from) != to).then_some(to)
                    }
                    MemberChange::Promote => ((ADMIN..=JOIN_REQUEST).contains(&from)
                        && from > rank)
                        .then_some(Some(from - 1)),
                    MemberChange::Demote => {
                        let allowed = (SUPERADMIN..MEMBER).contains(&from)
                            && from >= rank
                            && (from != SUPERADMIN || superadmins > 1);
                        allowed.then_some(Some(from + 1))
                    }
                    MemberChange::Join | MemberChange::Leave => None,
                };
                if let Some(to) = to {
                    if from == SUPERADMIN {
                        superadmins -= 1;
                    }
                    if to == Some(SUPERADMIN) {
                        superadmins += 1;
                    }
                    plan.push(target.id, Some(from), to);
                }
            }
        }
    }
    for step in &plan.steps {
        if step.became_member() {
            plan.edge_count += 1;
        } else if step.stopped_being_member() {
            plan.edge_count -= 1;
        }
    }
    if plan.edge_count > before.max_count && plan.edge_count > before.edge_count {
        return Err(GroupRefusal::Full);
    }
    Ok(plan)
}

impl Plan {
    fn push(&mut self, user: Uuid, from: Option<i32>, to: Option<i32>) {
        self.steps.push(Step { user, from, to });
    }
}

/// A group's filter in a listing: by name (`%` a wildcard, case-insensitive), or by language,
/// open or closed, and most members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupFilter {
    pub name: Option<String>,
    pub lang_tag: Option<String>,
    pub open: Option<bool>,
    pub max_members: Option<i32>,
}

/// Where a listing of groups resumes: after this name (name listings) or this size and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupAfter {
    Name(String),
    Size(i32, Uuid),
}

/// A user of a group with their state and when they got there.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupUserRecord {
    pub user: AccountRecord,
    pub state: i32,
    pub position: i64,
}

/// A group a user is in with their state and when they got there.
#[derive(Debug, Clone, PartialEq)]
pub struct UserGroupRecord {
    pub group: GroupRecord,
    pub state: i32,
    pub position: i64,
}

/// What a change of membership did.
#[derive(Debug, Clone, PartialEq)]
pub struct Changed {
    pub group: GroupRecord,
    pub steps: Vec<Step>,
    /// The group's superadmins and admins (told of join requests).
    pub admins: Vec<Uuid>,
}

/// Groups and their members. Each write is durable when its future resolves; each change of
/// membership is decided by [`plan`] on what the engine read under a lock of the group.
#[async_trait]
pub trait GroupStore: Send + Sync {
    /// Creates `group` with `creator` as its superadmin; `NameInUse` when the name is taken,
    /// `TooManyGroups` when the creator is in `max_groups` groups already.
    async fn create_group(
        &self,
        group: GroupRecord,
        max_groups: usize,
    ) -> Result<GroupRecord, StoreError>;

    /// Changes a group's fields: an actor must be its superadmin or admin (`PermissionDenied`
    /// otherwise, or when there is no such group); `NameInUse` for a taken name.
    async fn update_group(
        &self,
        id: Uuid,
        actor: Actor,
        changes: GroupChanges,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Deletes a group and its memberships (an actor must be a superadmin); the members it
    /// had.
    async fn delete_group(&self, id: Uuid, actor: Actor) -> Result<Vec<Uuid>, StoreError>;

    /// Applies `change` by `actor` to `targets` (ignored for a join or leave, which act on the
    /// actor). `NotFound` when there is no such group.
    async fn change_members(
        &self,
        id: Uuid,
        actor: Actor,
        change: MemberChange,
        targets: Vec<Uuid>,
        now_us: i64,
        max_groups: usize,
    ) -> Result<Changed, StoreError>;

    async fn group(&self, id: Uuid) -> Result<Option<GroupRecord>, StoreError>;

    /// Up to `count` groups from a random place (Nakama's `groupsGetRandom`): those whose id
    /// follows `pivot`, then from the first id when they are fewer.
    async fn random_groups(
        &self,
        pivot: Uuid,
        count: usize,
    ) -> Result<Vec<GroupRecord>, StoreError>;

    /// Groups passing `filter`, after `after`: by name for a name filter, else largest first.
    async fn list_groups(
        &self,
        filter: GroupFilter,
        after: Option<GroupAfter>,
        limit: usize,
    ) -> Result<Vec<GroupRecord>, StoreError>;

    /// A page of a group's users by state (or one `state`; bans only when asked for), then
    /// when they got there, after `(state, position, user)`.
    async fn group_users(
        &self,
        id: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<GroupUserRecord>, StoreError>;

    /// A page of a user's groups, ordered as [`GroupStore::group_users`].
    async fn user_groups(
        &self,
        user: Uuid,
        state: Option<i32>,
        after: Option<(i32, i64, Uuid)>,
        limit: usize,
    ) -> Result<Vec<UserGroupRecord>, StoreError>;

    /// `user`'s state in group `id`.
    async fn member_state(&self, id: Uuid, user: Uuid) -> Result<Option<i32>, StoreError>;
}

/// This slice's part of the schema (see [`crate::store::migrations`]).
pub const MIGRATIONS: &[crate::store::migrations::Migration] =
    &[crate::migration!(16, "groups", "0016_groups")];

#[cfg(test)]
mod tests {
    use super::*;

    fn before(
        open: bool,
        edge_count: i32,
        actor_state: Option<i32>,
        targets: &[(Uuid, Option<i32>)],
    ) -> Before {
        Before {
            open,
            edge_count,
            max_count: 3,
            actor_state,
            superadmins: 1,
            targets: targets
                .iter()
                .map(|&(id, state)| Target {
                    id,
                    state,
                    exists: true,
                    groups: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn joining_an_open_group_makes_a_member_and_a_closed_one_a_request() {
        let me = Uuid::new_v4();
        let open = plan(
            MemberChange::Join,
            Actor::User(me),
            &before(true, 1, None, &[(me, None)]),
            10,
        );
        assert_eq!(open.unwrap().edge_count, 2);
        let closed = plan(
            MemberChange::Join,
            Actor::User(me),
            &before(false, 1, None, &[(me, None)]),
            10,
        )
        .unwrap();
        assert_eq!(
            (closed.steps[0].to, closed.edge_count),
            (Some(JOIN_REQUEST), 1)
        );
        let full = plan(
            MemberChange::Join,
            Actor::User(me),
            &before(true, 3, None, &[(me, None)]),
            10,
        );
        assert_eq!(full, Err(GroupRefusal::Full));
        let banned = plan(
            MemberChange::Join,
            Actor::User(me),
            &before(true, 1, None, &[(me, Some(BANNED))]),
            10,
        );
        assert_eq!(banned, Err(GroupRefusal::Banned));
        let bounded = plan(
            MemberChange::Join,
            Actor::User(me),
            &before(true, 1, None, &[(me, None)]),
            0,
        );
        assert_eq!(bounded, Err(GroupRefusal::TooManyGroups));
    }

    #[test]
    fn an_admin_cannot_kick_a_superadmin_nor_the_last_superadmin_be_removed() {
        let admin = Uuid::new_v4();
        let boss = Uuid::new_v4();
        let by_admin = plan(
            MemberChange::Kick,
            Actor::User(admin),
            &before(true, 2, Some(ADMIN), &[(boss, Some(SUPERADMIN))]),
            10,
        )
        .unwrap();
        assert!(by_admin.steps.is_empty());
        let by_server = plan(
            MemberChange::Kick,
            Actor::Server,
            &before(true, 2, None, &[(boss, Some(SUPERADMIN))]),
            10,
        )
        .unwrap();
        assert!(by_server.steps.is_empty(), "the last superadmin stays");
        let member = plan(
            MemberChange::Kick,
            Actor::User(admin),
            &before(true, 2, Some(MEMBER), &[(boss, Some(MEMBER))]),
            10,
        );
        assert_eq!(member, Err(GroupRefusal::PermissionDenied));
        let leave = plan(
            MemberChange::Leave,
            Actor::User(boss),
            &before(true, 2, None, &[(boss, Some(SUPERADMIN))]),
            10,
        );
        assert_eq!(leave, Err(GroupRefusal::LastSuperadmin));
    }

    #[test]
    fn promoting_a_join_request_accepts_it_within_the_group_size() {
        let boss = Uuid::new_v4();
        let asker = Uuid::new_v4();
        let done = plan(
            MemberChange::Promote,
            Actor::User(boss),
            &before(false, 1, Some(SUPERADMIN), &[(asker, Some(JOIN_REQUEST))]),
            10,
        )
        .unwrap();
        assert_eq!((done.steps[0].to, done.edge_count), (Some(MEMBER), 2));
        let full = plan(
            MemberChange::Add,
            Actor::User(boss),
            &before(false, 3, Some(SUPERADMIN), &[(asker, Some(JOIN_REQUEST))]),
            10,
        );
        assert_eq!(full, Err(GroupRefusal::Full));
    }
}
