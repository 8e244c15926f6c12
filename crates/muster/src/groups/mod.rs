//! Groups, as Nakama has them: a name, a description, open (anyone joins) or closed (a join is
//! a request the admins accept), at most `max_count` members. Each user has a state in a group
//! — 0 superadmin, 1 admin, 2 member, 3 join request, 4 banned — and what they may do follows
//! from it ([`crate::groups::store::plan`]). Members join the group's chat (channel type 3);
//! whoever stops being a member leaves it at once, on any node (`evictions`). Join requests
//! and additions are persistent notifications with Nakama's codes.

pub mod config;
pub(crate) mod postgres;
pub(crate) mod sqlite;
pub mod store;

pub(crate) mod cursor;
pub(crate) mod evictions;

use std::sync::Arc;

use muster_proto::api::{
    CreateGroupRequest, Group, GroupList, GroupUser, GroupUserList, UpdateGroupRequest, UserGroup,
    UserGroupList,
};
use uuid::Uuid;

use crate::accounts::lifecycle::public_user;
use crate::base::ratelimit::KeyedLimit;
use crate::cluster::Router;
use crate::groups::config::GroupsConfig;
use crate::groups::store::{
    Actor, GroupAfter, GroupChanges, GroupFilter, GroupRecord, GroupRefusal, GroupStore,
    MemberChange,
};
use crate::notifications::{code, NewNotification, Notifications};
use crate::store::StoreError;
use evictions::Evictions;

/// Most users one add, kick, ban, promote or demote names.
pub const MAX_TARGETS: usize = 100;
/// Most ids one [`Groups::get_many`] names.
pub const MAX_GET_IDS: usize = 100;
/// Most entries one listing returns (Nakama's bound).
pub const MAX_LIST_LIMIT: usize = 100;
/// Longest name, in characters (Nakama's column).
pub const MAX_NAME_CHARS: usize = 255;
pub const MAX_DESCRIPTION_CHARS: usize = 255;
pub const MAX_AVATAR_URL_CHARS: usize = 512;
pub const MAX_LANG_TAG_CHARS: usize = 18;
/// Largest metadata (server code only), in bytes.
pub const MAX_METADATA_BYTES: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    /// Past `groups.creates_per_user_per_minute`.
    #[error("Too many groups created: slow down.")]
    TooFast,
    /// The change broke a rule of groups; nothing changed.
    #[error(transparent)]
    Refused(GroupRefusal),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for GroupError {
    /// A refusal the engine carried back is the slice's own again.
    fn from(error: StoreError) -> GroupError {
        match error.refusal::<GroupRefusal>() {
            Some(&refusal) => GroupError::Refused(refusal),
            None => GroupError::Store(error),
        }
    }
}

pub struct Groups {
    store: Arc<dyn GroupStore>,
    notifications: Arc<Notifications>,
    router: Arc<dyn Router>,
    evictions: Arc<Evictions>,
    config: GroupsConfig,
    creates: KeyedLimit<Uuid>,
}

impl Groups {
    pub fn new(
        store: Arc<dyn GroupStore>,
        notifications: Arc<Notifications>,
        router: Arc<dyn Router>,
        evictions: Arc<Evictions>,
        config: &GroupsConfig,
    ) -> Groups {
        Groups {
            store,
            notifications,
            router,
            evictions,
            config: config.clone(),
            creates: KeyedLimit::per_minute(config.creates_per_user_per_minute),
        }
    }

    /// Forgets rate-limit keys whose buckets are full again (housekeeping).
    pub fn prune_limits(&self) {
        self.creates.prune();
    }

    /// `user` creates a group and becomes its superadmin.
    pub async fn create(
        &self,
        user: Uuid,
        request: CreateGroupRequest,
    ) -> Result<Group, GroupError> {
        if request.name.is_empty() {
            return Err(invalid("Group name must be set."));
        }
        if request.max_count < 0 {
            return Err(invalid("Group max count must be >= 1 when set."));
        }
        check_fields(
            Some(&request.name),
            Some(&request.description),
            Some(&request.avatar_url),
            Some(&request.lang_tag),
        )?;
        if !self.creates.allow(user) {
            return Err(GroupError::TooFast);
        }
        let now_ms = crate::base::clock::now_ms();
        let max_count = if request.max_count == 0 {
            self.config.default_max_count
        } else {
            request.max_count
        };
        let group = self
            .store
            .create_group(
                GroupRecord {
                    id: Uuid::new_v4(),
                    creator_id: user,
                    name: request.name,
                    description: request.description,
                    avatar_url: request.avatar_url,
                    lang_tag: request.lang_tag,
                    metadata: "{}".into(),
                    open: request.open,
                    edge_count: 1,
                    max_count,
                    create_time_ms: now_ms,
                    update_time_ms: now_ms,
                },
                self.config.max_per_user,
            )
            .await?;
        Ok(group_view(group))
    }

    /// `actor` (a superadmin or admin, or server code) changes a group's fields.
    pub async fn update(
        &self,
        actor: Actor,
        group_id: &str,
        request: UpdateGroupRequest,
    ) -> Result<(), GroupError> {
        let id = group_id_from(group_id)?;
        if request.name.as_deref() == Some("") {
            return Err(invalid("Group name cannot be empty."));
        }
        if request.lang_tag.as_deref() == Some("") {
            return Err(invalid("Group language cannot be empty."));
        }
        check_fields(
            request.name.as_deref(),
            request.description.as_deref(),
            request.avatar_url.as_deref(),
            request.lang_tag.as_deref(),
        )?;
        let changes = GroupChanges {
            name: request.name,
            description: request.description,
            avatar_url: request.avatar_url,
            lang_tag: request.lang_tag,
            open: request.open,
            metadata: None,
            max_count: None,
        };
        self.apply_update(actor, id, changes).await
    }

    /// Server code's update: also metadata and `max_count`.
    pub async fn update_as_server(
        &self,
        id: Uuid,
        changes: GroupChanges,
    ) -> Result<(), GroupError> {
        if let Some(metadata) = &changes.metadata {
            check_metadata(metadata)?;
        }
        if changes.max_count.is_some_and(|n| n < 1) {
            return Err(invalid("Group max count must be >= 1 when set."));
        }
        self.apply_update(Actor::Server, id, changes).await
    }

    async fn apply_update(
        &self,
        actor: Actor,
        id: Uuid,
        changes: GroupChanges,
    ) -> Result<(), GroupError> {
        if changes.is_empty() {
            return Err(invalid("Specify at least one field to update."));
        }
        let now_ms = crate::base::clock::now_ms();
        self.store
            .update_group(id, actor, changes, now_ms)
            .await
            .map_err(|e| not_allowed(e, "Group not found or you're not allowed to update."))
    }

    /// `actor` (a superadmin, or server code) deletes a group; its members leave its chat.
    pub async fn delete(&self, actor: Actor, group_id: &str) -> Result<(), GroupError> {
        let id = group_id_from(group_id)?;
        let members = self
            .store
            .delete_group(id, actor)
            .await
            .map_err(|e| not_allowed(e, "Group not found or you're not allowed to delete."))?;
        self.evictions.evict(id, members);
        Ok(())
    }

    /// `user` joins an open group, or asks to join a closed one (its admins are told).
    /// Whether `user` is one of group `group`'s members (a superadmin, an admin or a member; not
    /// a join request or a ban).
    pub async fn is_member(&self, group: Uuid, user: Uuid) -> Result<bool, StoreError> {
        let state = self.store.member_state(group, user).await?;
        Ok(state.is_some_and(crate::groups::store::state::is_member))
    }

    pub async fn join(&self, user: Uuid, username: &str, group_id: &str) -> Result<(), GroupError> {
        let id = group_id_from(group_id)?;
        let changed = self
            .change(Actor::User(user), id, MemberChange::Join, Vec::new())
            .await?;
        if changed.steps.is_empty() || changed.group.open {
            return Ok(());
        }
        let content = serde_json::json!({ "group_id": id, "username": username }).to_string();
        let notices = changed
            .admins
            .into_iter()
            .map(|admin| NewNotification {
                user_id: admin,
                subject: format!("User {username} wants to join your group"),
                content: content.clone(),
                code: code::GROUP_JOIN_REQUEST,
                sender_id: Some(user),
                persistent: true,
            })
            .collect();
        self.tell(notices).await;
        Ok(())
    }

    /// `user` leaves a group (or withdraws a join request).
    pub async fn leave(&self, user: Uuid, group_id: &str) -> Result<(), GroupError> {
        let id = group_id_from(group_id)?;
        self.change(Actor::User(user), id, MemberChange::Leave, Vec::new())
            .await?;
        Ok(())
    }

    /// `actor` adds, kicks, bans, promotes or demotes `user_ids` in a group, as Nakama: those
    /// the actor may not act on are skipped.
    pub async fn change_users(
        &self,
        actor: Actor,
        group_id: &str,
        change: MemberChange,
        user_ids: &[String],
    ) -> Result<(), GroupError> {
        let id = group_id_from(group_id)?;
        if user_ids.is_empty() {
            return Err(invalid("User IDs must be set."));
        }
        if user_ids.len() > MAX_TARGETS {
            return Err(invalid(format!("At most {MAX_TARGETS} user IDs at once.")));
        }
        let mut targets = user_ids
            .iter()
            .map(|id| Uuid::parse_str(id).map_err(|_| invalid("User ID must be a valid ID.")))
            .collect::<Result<Vec<_>, _>>()?;
        targets.sort_unstable();
        targets.dedup();
        let changed = self.change(actor, id, change, targets).await?;
        if change == MemberChange::Add {
            let group = &changed.group;
            let content =
                serde_json::json!({ "group_id": group.id, "name": group.name }).to_string();
            let sender = match actor {
                Actor::User(user) => Some(user),
                Actor::Server => None,
            };
            let notices = changed
                .steps
                .iter()
                .filter(|step| step.became_member())
                .map(|step| NewNotification {
                    user_id: step.user,
                    subject: format!("You've been added to group {}", group.name),
                    content: content.clone(),
                    code: code::GROUP_ADD,
                    sender_id: sender,
                    persistent: true,
                })
                .collect();
            self.tell(notices).await;
        }
        Ok(())
    }

    async fn change(
        &self,
        actor: Actor,
        id: Uuid,
        change: MemberChange,
        targets: Vec<Uuid>,
    ) -> Result<crate::groups::store::Changed, GroupError> {
        let changed = self
            .store
            .change_members(
                id,
                actor,
                change,
                targets,
                now_us(),
                self.config.max_per_user,
            )
            .await?;
        let gone = changed
            .steps
            .iter()
            .filter(|step| step.stopped_being_member())
            .map(|step| step.user)
            .collect();
        self.evictions.evict(id, gone);
        Ok(changed)
    }

    /// The groups of `ids` that exist, in the order asked (each once; unknown ids left out,
    /// as Nakama's `GetGroups`); at most [`MAX_GET_IDS`] ids.
    pub async fn get_many(&self, ids: &[String]) -> Result<Vec<Group>, GroupError> {
        if ids.len() > MAX_GET_IDS {
            return Err(invalid(format!("At most {MAX_GET_IDS} group IDs at once.")));
        }
        let mut wanted: Vec<Uuid> = Vec::with_capacity(ids.len());
        for id in ids {
            let id = group_id_from(id)?;
            if !wanted.contains(&id) {
                wanted.push(id);
            }
        }
        let mut found = Vec::with_capacity(wanted.len());
        for id in wanted {
            if let Some(group) = self.store.group(id).await? {
                found.push(group_view(group));
            }
        }
        Ok(found)
    }

    /// Up to `count` (at most 1,000, as Nakama) groups from a random place (Nakama's
    /// `groupsGetRandom`).
    pub async fn random(&self, count: usize) -> Result<Vec<Group>, GroupError> {
        if count > 1_000 {
            return Err(invalid("count must be 0 to 1000".to_owned()));
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        let records = self.store.random_groups(Uuid::new_v4(), count).await?;
        Ok(records.into_iter().map(group_view).collect())
    }

    /// Groups by name (`%` a wildcard; not with other filters), or by language, open or
    /// closed, and most members, largest first; `limit` 1–100 (1 when absent, as Nakama).
    pub async fn list(&self, query: GroupQuery) -> Result<GroupList, GroupError> {
        let limit = checked_limit(query.limit, 1)?;
        let name = query
            .name
            .map(|name| name.trim_start_matches(['%', ' ']).to_owned())
            .filter(|name| !name.is_empty());
        if name.is_some()
            && (query.lang_tag.is_some() || query.open.is_some() || query.members.is_some())
        {
            return Err(invalid(
                "name filter cannot be combined with any other filter",
            ));
        }
        if name
            .as_ref()
            .is_some_and(|n| n.chars().count() > MAX_NAME_CHARS)
        {
            return Err(invalid("Group name filter is too long."));
        }
        let by_name = name.is_some();
        let after = if query.cursor.is_empty() {
            None
        } else {
            let after = cursor::decode(&query.cursor)
                .filter(|after| matches!(after, GroupAfter::Name(_)) == by_name)
                .ok_or_else(|| invalid("Malformed cursor was used."))?;
            Some(after)
        };
        let filter = GroupFilter {
            name,
            lang_tag: query.lang_tag,
            open: query.open,
            max_members: query.members,
        };
        let mut groups = self.store.list_groups(filter, after, limit + 1).await?;
        let more = groups.len() > limit;
        groups.truncate(limit);
        let cursor = match groups.last() {
            Some(last) if more => cursor::encode(&if by_name {
                GroupAfter::Name(last.name.clone())
            } else {
                GroupAfter::Size(last.edge_count, last.id)
            }),
            _ => String::new(),
        };
        Ok(GroupList {
            groups: groups.into_iter().map(group_view).collect(),
            cursor,
        })
    }

    /// A page of a group's users (all but bans, or one `state`), by state then arrival.
    pub async fn users(
        &self,
        group_id: &str,
        limit: Option<usize>,
        state: Option<i32>,
        cursor: &str,
    ) -> Result<GroupUserList, GroupError> {
        let id = group_id_from(group_id)?;
        let limit = checked_limit(limit, MAX_LIST_LIMIT)?;
        let after = member_cursor(state, cursor)?;
        let mut records = self.store.group_users(id, state, after, limit + 1).await?;
        let more = records.len() > limit;
        records.truncate(limit);
        let cursor = match records.last() {
            Some(last) if more => {
                crate::friends::cursor::encode(last.state, last.position, last.user.id)
            }
            _ => String::new(),
        };
        let group_users = records
            .into_iter()
            .map(|record| {
                let online = self.router.is_online(record.user.id);
                GroupUser {
                    user: public_user(record.user, online),
                    state: record.state,
                }
            })
            .collect();
        Ok(GroupUserList {
            group_users,
            cursor,
        })
    }

    /// A page of the groups `user_id` is in (all but bans, or one `state`).
    pub async fn of_user(
        &self,
        user_id: &str,
        limit: Option<usize>,
        state: Option<i32>,
        cursor: &str,
    ) -> Result<UserGroupList, GroupError> {
        if user_id.is_empty() {
            return Err(invalid("User ID must be set."));
        }
        let user = Uuid::parse_str(user_id).map_err(|_| invalid("User ID must be a valid ID."))?;
        let limit = checked_limit(limit, MAX_LIST_LIMIT)?;
        let after = member_cursor(state, cursor)?;
        let mut records = self
            .store
            .user_groups(user, state, after, limit + 1)
            .await?;
        let more = records.len() > limit;
        records.truncate(limit);
        let cursor = match records.last() {
            Some(last) if more => {
                crate::friends::cursor::encode(last.state, last.position, last.group.id)
            }
            _ => String::new(),
        };
        Ok(UserGroupList {
            user_groups: records
                .into_iter()
                .map(|record| UserGroup {
                    group: group_view(record.group),
                    state: record.state,
                })
                .collect(),
            cursor,
        })
    }

    /// Persistent notifications; a failure is logged, not the caller's (the group changed).
    async fn tell(&self, notices: Vec<NewNotification>) {
        if notices.is_empty() {
            return;
        }
        if let Err(error) = self.notifications.send(notices).await {
            tracing::warn!(%error, "groups: a notification could not be sent");
        }
    }
}

/// The filters of `GET /v2/group`.
#[derive(Debug, Default)]
pub struct GroupQuery {
    pub name: Option<String>,
    pub cursor: String,
    pub limit: Option<usize>,
    pub lang_tag: Option<String>,
    pub members: Option<i32>,
    pub open: Option<bool>,
}

fn invalid(message: impl Into<String>) -> GroupError {
    GroupError::Invalid(message.into())
}

/// Nakama's answer when a group is missing or the actor may not touch it: one message for
/// both, so that a non-member cannot tell a closed group from none.
fn not_allowed(error: StoreError, message: &str) -> GroupError {
    match error.refusal::<GroupRefusal>() {
        Some(GroupRefusal::NotFound | GroupRefusal::PermissionDenied) => {
            GroupError::NotFound(message.to_owned())
        }
        _ => error.into(),
    }
}

fn group_id_from(text: &str) -> Result<Uuid, GroupError> {
    if text.is_empty() {
        return Err(invalid("Group ID must be set."));
    }
    Uuid::parse_str(text).map_err(|_| invalid("Group ID must be a valid ID."))
}

fn checked_limit(limit: Option<usize>, default: usize) -> Result<usize, GroupError> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=MAX_LIST_LIMIT).contains(&n) => Ok(n),
        Some(_) => Err(invalid("Invalid limit - limit must be between 1 and 100.")),
    }
}

fn member_cursor(state: Option<i32>, cursor: &str) -> Result<Option<(i32, i64, Uuid)>, GroupError> {
    if state.is_some_and(|s| !(0..=4).contains(&s)) {
        return Err(invalid("Invalid state - state must be between 0 and 4."));
    }
    if cursor.is_empty() {
        return Ok(None);
    }
    crate::friends::cursor::decode(cursor)
        .filter(|(s, _, _)| state.is_none_or(|state| state == *s))
        .map(Some)
        .ok_or_else(|| invalid("Cursor is invalid."))
}

fn check_fields(
    name: Option<&str>,
    description: Option<&str>,
    avatar_url: Option<&str>,
    lang_tag: Option<&str>,
) -> Result<(), GroupError> {
    for (value, max, what) in [
        (name, MAX_NAME_CHARS, "Group name"),
        (description, MAX_DESCRIPTION_CHARS, "Group description"),
        (avatar_url, MAX_AVATAR_URL_CHARS, "Group avatar URL"),
        (lang_tag, MAX_LANG_TAG_CHARS, "Group language"),
    ] {
        let Some(value) = value else { continue };
        if value.chars().count() > max {
            return Err(invalid(format!("{what} must be at most {max} characters.")));
        }
        if value.chars().any(char::is_control) {
            return Err(invalid(format!(
                "{what} must not contain control characters."
            )));
        }
    }
    Ok(())
}

fn check_metadata(metadata: &str) -> Result<(), GroupError> {
    if metadata.len() > MAX_METADATA_BYTES {
        return Err(invalid(format!(
            "Group metadata must be at most {MAX_METADATA_BYTES} bytes."
        )));
    }
    match serde_json::from_str::<serde_json::Value>(metadata) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        _ => Err(invalid("Group metadata must be a JSON object.")),
    }
}

fn group_view(group: GroupRecord) -> Group {
    Group {
        id: group.id.to_string(),
        creator_id: group.creator_id.to_string(),
        name: group.name,
        description: group.description,
        lang_tag: group.lang_tag,
        metadata: group.metadata,
        avatar_url: group.avatar_url,
        open: group.open,
        edge_count: group.edge_count,
        max_count: group.max_count,
        create_time: crate::base::clock::rfc3339(group.create_time_ms),
        update_time: crate::base::clock::rfc3339(group.update_time_ms),
    }
}

fn now_us() -> i64 {
    crate::base::clock::now_ms() * 1000
}
